# libFuzzer targets of the readers (fuzz/*.c), built with clang into
# build-fuzz/. Included by the Makefile.
#   make fuzz-build              every target, build-fuzz/fuzz/<target>
#   make fuzz [FUZZ_SECONDS=60]  run each target that long (two at a time)
#                                on build-fuzz/corpus/<target>, a copy of
#                                fuzz/corpus/<target> that keeps what it
#                                finds; crashes go to build-fuzz/findings/
#   make fuzz FUZZ_TARGETS="image store"   only those
# tests/e2e/test_fuzz.sh (make test) builds them and runs each for 5 seconds on
# the seeds and the regression inputs of tests/fuzz-regressions/<target>/.
#
# The library sources are compiled again with -fsanitize=fuzzer-no-link
# (coverage for the fuzzer) plus AddressSanitizer and UBSan: those of the
# folders in FUZZ_DIRS, where the readers and everything they call live (not
# the compute backends, the CPE emulator, the cluster over MPI and its
# all-reduce algorithms or the parameter server's OpenMP ps.c and the
# gradient accumulation's accumulate.c, which no reader reaches). stb_image is
# compiled in from Debian's header (fuzz/stb_image.c) instead of linking
# libstb, so the decoder is instrumented as well.

FUZZ_CC ?= clang-14
FUZZ_DIRS := base ops data layers net parallel dist train cmd
FUZZ_BUILD := build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := cfg idx cifar store snapshot weights image onnx
FUZZ_BIN := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz/%)
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS := -O1 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wno-unused-parameter \
               $(WERROR) -MMD -MP -Iinclude -fno-omit-frame-pointer
FUZZ_LIB_SRC := $(filter-out src/cmd/main.c $(CLUSTER_MPI_SRC) src/parallel/ps.c \
                src/parallel/accumulate.c,\
                $(wildcard $(FUZZ_DIRS:%=src/%/*.c)))
# The ONNX schema's protoc-c code (the Makefile's ONNX_GEN) generated here
# too, and instrumented with the reader.
FUZZ_ONNX_GEN := $(FUZZ_BUILD)/gen/onnx.pb-c.c
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=$(FUZZ_BUILD)/%.o) $(FUZZ_ONNX_GEN:.c=.o)
FUZZ_ONNX_USERS := $(patsubst %.c,$(FUZZ_BUILD)/%.o,$(wildcard src/net/onnx*.c))
FUZZ_LIB := $(FUZZ_BUILD)/libsingletrain.a
FUZZ_STB := $(FUZZ_BUILD)/fuzz/stb_image.o
FUZZ_LDLIBS := -lprotobuf-c -lz -lm -lpthread

.PHONY: fuzz fuzz-build

$(FUZZ_BUILD)/src/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_ONNX_GEN) $(FUZZ_ONNX_GEN:.c=.h) &: $(ONNX_PROTO)
	@mkdir -p $(dir $@)
	protoc-c --c_out=$(dir $@) --proto_path=$(dir $(ONNX_PROTO)) $(ONNX_PROTO)

$(FUZZ_ONNX_GEN:.c=.o): $(FUZZ_ONNX_GEN)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link -w -c $< -o $@

$(FUZZ_ONNX_USERS): $(FUZZ_ONNX_GEN:.c=.h)
$(FUZZ_ONNX_USERS): FUZZ_CFLAGS += -I$(FUZZ_BUILD)/gen

$(FUZZ_LIB): $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_STB): fuzz/stb_image.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -O1 -g -fsanitize=address,fuzzer-no-link -w -c $< -o $@

$(FUZZ_BUILD)/fuzz/%: fuzz/%.c fuzz/fuzz_files.h fuzz/fuzz_net.h fuzz/fuzz_source.h $(FUZZ_LIB) $(FUZZ_STB)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer \
	    -DST_FUZZ_NET_CFG='"$(CURDIR)/fuzz/tiny.cfg"' -o $@ $< $(FUZZ_LIB) $(FUZZ_STB) \
	    $(FUZZ_LDLIBS)

fuzz-build: $(FUZZ_BIN)

fuzz: fuzz-build
	@sh fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

-include $(FUZZ_LIB_OBJ:.o=.d) $(FUZZ_BIN:=.d)
