# singletrain build, run and test.
#   make            build build/singletrain
#   make run        install what is missing, build, train LeNet-5 on Fashion-MNIST
#   make test       install what is missing (scripts/deps.sh --test), build,
#                   run every test
#   make test T=PATTERN   only the tests (and cases) whose names match
#                         (tests/README.md; conformance/cpe/: one backend)
#   make SAN=address,undefined ...   sanitizer build (in build-address/;
#                                    SAN=thread builds in build-thread/)
#   make PORTABLE=1 ...              the emulator's portable paths (in
#                                    build-portable/; see PORTABLE_TESTS)
#   make install PREFIX=/usr/local   the binary, singletrain.1, the networks, the
#                                    SW26010 files, the scripts and the guide
#                                    (DESTDIR stages; make uninstall removes them)
#   make fuzz FUZZ_SECONDS=60        run each reader's fuzz target (mk/fuzz.mk)
#   make WERROR= ...                 warnings not errors (they are by default)

CC      ?= gcc
PREFIX  ?= /usr/local
SAN     ?=
PORTABLE ?=
comma   := ,
BUILD   := $(if $(SAN),build-$(firstword $(subst $(comma), ,$(SAN))),$(if $(PORTABLE),build-portable,build))

CFLAGS  ?= -O3 -g
# Warnings are errors in every build (make test's, the sanitized, portable
# and fuzz builds), so that what the recipes promise holds: a missing case of
# a switch over an extension point's enum fails the build. WERROR= keeps them
# warnings (another compiler's new ones).
WERROR  ?= -Werror
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wno-unused-parameter $(WERROR) \
           -MMD -MP -Iinclude -fno-omit-frame-pointer
LDLIBS  := -ldnnl -fopenmp -lstb -lhwloc -lprotobuf-c -lz -lm -lpthread
ifneq ($(SAN),)
CFLAGS  += -fsanitize=$(SAN) -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SAN)
endif
ifneq ($(PORTABLE),)
CFLAGS  += -DST_CPE_PORTABLE
endif

# Sources by folder (their map: docs/design.md): every src/<folder>/*.c and
# src/<folder>/<sub>/*.c. Public headers are include/<folder>/*.h, included
# as "folder/name.h"; a folder's private headers sit beside its sources
# (there is no -Isrc). scripts/check-includes.sh (make test) keeps the
# folders' dependencies one way.
SRC := $(wildcard src/*/*.c src/*/*/*.c)
MAIN_SRC := src/cmd/main.c
# The cluster (dist/cluster.h) twice: over MPICH for the binary that mpirun
# starts, and for one node without MPI for the tests and tools, which so
# link no MPI library (as libuv's stubs where a platform lacks a feature).
# Over MPICH it is a file per job (src/dist/cluster_mpi.h lists them).
CLUSTER_MPI_SRC := $(addprefix src/dist/,cluster_mpi.c cluster_agree.c cluster_allreduce.c \
                   cluster_probe.c cluster_parts.c cluster_report.c)
CLUSTER_SINGLE_SRC := src/dist/cluster_single.c
# The all-reduce algorithms, compiled with mpicc (mk/mpi.mk); their names
# (names.c) and costs (cost.c) are MPI-free and in the library.
ALLREDUCE_SRC := $(filter-out src/dist/allreduce/names.c src/dist/allreduce/cost.c,$(wildcard src/dist/allreduce/*.c))
LIB_SRC := $(filter-out $(MAIN_SRC) $(CLUSTER_MPI_SRC) $(CLUSTER_SINGLE_SRC) $(ALLREDUCE_SRC),$(SRC))
OBJ  := $(filter-out $(ALLREDUCE_SRC:%.c=$(BUILD)/%.o),$(SRC:%.c=$(BUILD)/%.o))
# The SW26010 model file and machine description, built into the library
# as C strings (st_sw26010_model_builtin, include/cpe/model.h;
# st_cpe_machine_builtin, include/cpe/machine.h).
MODEL_CONF := data/sw26010/model.conf
MODEL_GEN := $(BUILD)/gen/sw26010_model.c
MACHINE_CONF := data/sw26010/sw26010.machine
MACHINE_GEN := $(BUILD)/gen/sw26010_machine.c
# The ONNX schema (Debian's libonnx-dev) compiled by protoc-c into the
# build directory, for the ONNX reader (src/net/onnx*.c, which include
# <onnx.pb-c.h> from there): generated, not vendored.
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
ONNX_GEN := $(BUILD)/gen/onnx.pb-c.c
ONNX_USERS := $(patsubst %.c,$(BUILD)/%.o,$(wildcard src/net/onnx*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(MODEL_GEN:.c=.o) $(MACHINE_GEN:.c=.o) $(ONNX_GEN:.c=.o)
CLUSTER_MPI_OBJ := $(CLUSTER_MPI_SRC:%.c=$(BUILD)/%.o)
CLUSTER_SINGLE_OBJ := $(CLUSTER_SINGLE_SRC:%.c=$(BUILD)/%.o)
# Only pattern rules need it: kept, not removed as an intermediate file.
.SECONDARY: $(CLUSTER_SINGLE_OBJ)
BIN  := $(BUILD)/singletrain
LIB  := $(BUILD)/libsingletrain.a

# The tests (tests/README.md): C unit tests tests/unit/test_*.c, one binary
# each; every one also runs under AddressSanitizer + UBSan. Those whose
# source says "@tsan" start threads and also run under ThreadSanitizer;
# those that say "@portable" also run in the portable build (the emulator's
# CPE contexts on ucontext instead of the x86-64 switch, its GEMM without
# the AVX2 clone: what a machine without x86-64 or AVX2 runs).
TESTS_C := $(wildcard tests/unit/test_*.c)
TEST_NAMES := $(TESTS_C:tests/unit/%.c=%)
TEST_BIN := $(TEST_NAMES:%=$(BUILD)/tests/%)
tests_tagged = $(patsubst tests/unit/%.c,%,$(shell grep -l '@$(1)\b' $(TESTS_C)))
SAN_TESTS := $(TEST_NAMES)
TSAN_TESTS := $(call tests_tagged,tsan)
PORTABLE_TESTS := $(call tests_tagged,portable)
TOOLS := $(BUILD)/tools/make_images $(BUILD)/tools/snapdiff $(BUILD)/tools/lrsched

# MPI (MPICH): the all-reduce module and its tests are built with mpicc
# (mk/mpi.mk); the cluster's files (CLUSTER_MPI_SRC) take MPICH's flags.
MPI_CFLAGS = $(shell pkg-config --cflags mpich 2>/dev/null)
MPI_LIBS = $(shell pkg-config --libs mpich 2>/dev/null)
include mk/mpi.mk

.PHONY: all run test deps deps-test install uninstall clean check-tests
all: $(BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# oneDNN is built on OpenMP in Debian; its backend sets the team size (in
# dnnl.c, the context; its plain-C passes, the direct max pooling and the
# activation's backward on bf16 outputs, the im2col of a convolution's
# weight gradient, run on that team), and the parameter server runs a
# worker's slice on its intra-op threads, as the gradient accumulation
# (subdivisions=) adds its pieces.
$(BUILD)/src/backends/dnnl/dnnl.o $(BUILD)/src/backends/dnnl/dnnl_pool.o \
    $(BUILD)/src/backends/dnnl/dnnl_eltwise.o $(BUILD)/src/backends/dnnl/dnnl_conv_matmul.o \
    $(BUILD)/src/parallel/ps.o \
    $(BUILD)/src/parallel/accumulate.o: CFLAGS += -fopenmp
# sqrtf without errno: the adaptive update rules vectorise (4x faster on
# LeNet-5's 431k parameters, the same results).
$(BUILD)/src/ops/solver.o: CFLAGS += -fno-math-errno

# embed_text NAME: the recipe that writes $< as the C string NAME.
embed_text = awk 'BEGIN { print "/* Generated from $< by the Makefile. */"; \
	             print "const char $(1)[] ="; } \
	     { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); print "    \"" $$0 "\\n\"" } \
	     END { print "    \"\";" }' $< > $@.tmp && mv $@.tmp $@

$(MODEL_GEN): $(MODEL_CONF)
	@mkdir -p $(dir $@)
	$(call embed_text,st_sw26010_model_builtin)

$(MACHINE_GEN): $(MACHINE_CONF)
	@mkdir -p $(dir $@)
	$(call embed_text,st_cpe_machine_builtin)

$(MODEL_GEN:.c=.o) $(MACHINE_GEN:.c=.o): %.o: %.c
	$(CC) $(CFLAGS) -c $< -o $@

$(ONNX_GEN) $(ONNX_GEN:.c=.h) &: $(ONNX_PROTO)
	@mkdir -p $(dir $@)
	protoc-c --c_out=$(dir $@) --proto_path=$(dir $(ONNX_PROTO)) $(ONNX_PROTO)

# protoc-c's code, warnings off: it is not ours to change.
$(ONNX_GEN:.c=.o): $(ONNX_GEN)
	$(CC) $(CFLAGS) -w -c $< -o $@

$(ONNX_USERS): $(ONNX_GEN:.c=.h)
$(ONNX_USERS): CFLAGS += -I$(BUILD)/gen

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(CLUSTER_MPI_OBJ): CFLAGS += $(MPI_CFLAGS)

# The all-reduce library before libsingletrain.a: it calls into it.
$(BIN): $(BUILD)/$(MAIN_SRC:.c=.o) $(CLUSTER_MPI_OBJ) $(ALLREDUCE_LIB) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(MPI_LIBS)

$(BUILD)/tests/%: tests/unit/%.c $(wildcard tests/lib/*.h) $(CLUSTER_SINGLE_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/lib -o $@ $< $(CLUSTER_SINGLE_OBJ) $(LIB) $(LDFLAGS) -lcmocka \
	    $(LDLIBS)

$(BUILD)/tools/%: tests/tools/%.c $(wildcard tests/lib/*.h) $(CLUSTER_SINGLE_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/lib -o $@ $< $(CLUSTER_SINGLE_OBJ) $(LIB) $(LDFLAGS) $(LDLIBS)

deps:
	@scripts/deps.sh

deps-test:
	@scripts/deps.sh --test

run: deps
	@$(MAKE) --no-print-directory all
	./$(BIN) data/lenet.cfg

check-tests: $(BIN) $(TEST_BIN) $(TOOLS)
	@$(MAKE) --no-print-directory SAN=address,undefined $(SAN_TESTS:%=build-address/tests/%)
	@$(MAKE) --no-print-directory SAN=thread $(TSAN_TESTS:%=build-thread/tests/%)
	@$(MAKE) --no-print-directory PORTABLE=1 $(PORTABLE_TESTS:%=build-portable/tests/%)
	@TESTS="$(TEST_NAMES)" SAN_TESTS="$(SAN_TESTS)" TSAN_TESTS="$(TSAN_TESTS)" \
	    PORTABLE_TESTS="$(PORTABLE_TESTS)" ST_TEST_FILTER="$(or $(T),$(ST_TEST_FILTER))" \
	    scripts/run-tests.sh $(BUILD)

# The builds (plain, sanitized, portable) on every core; the tests then run
# one at a time (some measure time or CPU use), but for the single-threaded
# ones that measure nothing, two at a time, beside the sanitized builds'
# (scripts/run-tests.sh).
test: deps-test
	@$(MAKE) --no-print-directory -j$(shell nproc) check-tests

# make install (README.md, "Install"): PREFIX/bin/singletrain and the manual
# page; under PREFIX/share/singletrain the network cfgs (networks/, where a
# NET.cfg without a slash is looked up: src/cmd/netpath.c), the SW26010
# machine and model files (sw26010/), the shape benchmark's cfgs (bench/)
# and the user's scripts (scripts/, with what they source and run), each
# also PREFIX/bin/singletrain-NAME, a relative link (scripts/paths.sh
# finds the binary and the data from the link's target); the guide, README.md
# and docs/, under PREFIX/share/doc/singletrain. DESTDIR stages a package;
# the tree is relocatable (nothing records PREFIX).
SHARE := $(DESTDIR)$(PREFIX)/share/singletrain
DOC := $(DESTDIR)$(PREFIX)/share/doc/singletrain
USER_SCRIPTS := sweep plot predict-sw26010 calibrate-sw26010 bench bench-layout bench-scaling \
                bench-shapes bench-solvers
SCRIPT_FILES := $(USER_SCRIPTS:%=scripts/%.sh) scripts/paths.sh scripts/speed-ratio.awk \
                scripts/sw26010-scaling.awk scripts/torch-ddp.py
install: $(BIN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(SHARE)/networks \
	    $(SHARE)/sw26010 $(SHARE)/bench $(SHARE)/scripts $(DOC)
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/singletrain
	install -m 644 singletrain.1 $(DESTDIR)$(PREFIX)/share/man/man1/singletrain.1
	install -m 644 $(wildcard data/*.cfg) $(SHARE)/networks
	install -m 644 $(wildcard data/sw26010/*) $(SHARE)/sw26010
	install -m 644 $(wildcard data/bench/*.cfg) $(SHARE)/bench
	install -m 755 $(SCRIPT_FILES) $(SHARE)/scripts
	chmod 644 $(SHARE)/scripts/paths.sh $(SHARE)/scripts/*.awk
	for s in $(USER_SCRIPTS); do \
	    ln -sf ../share/singletrain/scripts/$$s.sh $(DESTDIR)$(PREFIX)/bin/singletrain-$$s || exit 1; \
	done
	install -m 644 README.md $(DOC)
	find docs -type f | while read -r f; do install -D -m 644 "$$f" "$(DOC)/$$f" || exit 1; done

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/singletrain $(DESTDIR)$(PREFIX)/share/man/man1/singletrain.1 \
	    $(USER_SCRIPTS:%=$(DESTDIR)$(PREFIX)/bin/singletrain-%)
	rm -rf $(SHARE) $(DOC)

clean:
	rm -rf build build-* $(FUZZ_BUILD)

# libFuzzer targets of the readers (clang): make fuzz, make fuzz-build.
include mk/fuzz.mk

-include $(OBJ:.o=.d)
