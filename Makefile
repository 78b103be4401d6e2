# singletrain build, run and test.
#   make            build build/singletrain
#   make run        install what is missing, build, train LeNet-5 on Fashion-MNIST
#   make test       install what is missing, build, run every test
#   make SAN=address,undefined ...   sanitizer build (in build-address/;
#                                    SAN=thread builds in build-thread/)
#   make PORTABLE=1 ...              the emulator's portable paths (in
#                                    build-portable/; see PORTABLE_TESTS)
#   make install PREFIX=/usr/local   the binary and singletrain.1 (DESTDIR stages)
#   make fuzz FUZZ_SECONDS=60        run each reader's fuzz target (mk/fuzz.mk)

CC      ?= gcc
PREFIX  ?= /usr/local
SAN     ?=
PORTABLE ?=
comma   := ,
BUILD   := $(if $(SAN),build-$(firstword $(subst $(comma), ,$(SAN))),$(if $(PORTABLE),build-portable,build))

CFLAGS  ?= -O3 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wno-unused-parameter -MMD -MP \
           -Iinclude -Isrc -fno-omit-frame-pointer
LDLIBS  := -ldnnl -fopenmp -lstb -lz -lm -lpthread
ifneq ($(SAN),)
CFLAGS  += -fsanitize=$(SAN) -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SAN)
endif
ifneq ($(PORTABLE),)
CFLAGS  += -DST_CPE_PORTABLE
endif

SRC  := $(wildcard src/*.c src/layers/*.c src/backends/*.c src/backends/ref/*.c src/cpe/*.c)
LIB_SRC := $(filter-out src/main.c,$(SRC))
OBJ  := $(SRC:%.c=$(BUILD)/%.o)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
BIN  := $(BUILD)/singletrain
LIB  := $(BUILD)/libsingletrain.a

TESTS_C := $(wildcard tests/test_*.c)
TEST_BIN := $(TESTS_C:tests/%.c=$(BUILD)/tests/%)
TOOLS := $(BUILD)/tools/make_images $(BUILD)/tools/snapdiff
# Tests that also run under AddressSanitizer + UndefinedBehaviorSanitizer
# (every C test), and under ThreadSanitizer (those that start threads, but
# test_train: its trainings take about 7 minutes there, and test_sched runs
# the scheduler, the prefetcher and the trainer under it).
SAN_TESTS := test_fuzz_cfg test_cfg test_gradcheck test_dnnl_equiv test_readers test_weights test_snapshot \
             test_solver test_cpe test_cpe_conv test_cpe_kernels test_cpe_calibration test_sched \
             test_store test_train
TSAN_TESTS := test_sched test_readers test_store test_choices
# Tests that also run in the portable build: the emulator's CPE contexts on
# ucontext instead of the x86-64 switch, and its GEMM without the AVX2
# clone: what a machine without x86-64 or AVX2 runs.
PORTABLE_TESTS := test_cpe test_cpe_conv test_cpe_kernels

# MPI (MPICH): the all-reduce module and its tests are built with mpicc
# (mk/mpi.mk); cluster.c, the trainer's one MPI file, takes MPICH's flags.
MPI_CFLAGS = $(shell pkg-config --cflags mpich 2>/dev/null)
MPI_LIBS = $(shell pkg-config --libs mpich 2>/dev/null)
include mk/mpi.mk
LDLIBS  += $(ALLREDUCE_LIB) $(MPI_LIBS)

.PHONY: all run test deps install clean check-tests
all: $(BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# oneDNN is built on OpenMP in Debian; its backend sets the team size, and
# the parameter server runs a worker's slice on its intra-op threads.
$(BUILD)/src/backends/dnnl.o $(BUILD)/src/ps.o: CFLAGS += -fopenmp
# sqrtf without errno: the adaptive update rules vectorise (4x faster on
# LeNet-5's 431k parameters, the same results).
$(BUILD)/src/solver.o: CFLAGS += -fno-math-errno

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/src/cluster.o: CFLAGS += $(MPI_CFLAGS)

$(BIN): $(BUILD)/src/main.o $(LIB) $(ALLREDUCE_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(wildcard tests/*.h) $(LIB) $(ALLREDUCE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(LIB) $(LDFLAGS) -lcmocka $(LDLIBS)

$(BUILD)/tools/%: tests/tools/%.c $(LIB) $(ALLREDUCE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDFLAGS) $(LDLIBS)

deps:
	@scripts/deps.sh

run: deps
	@$(MAKE) --no-print-directory all
	./$(BIN) data/lenet.cfg

check-tests: $(BIN) $(TEST_BIN) $(TOOLS)
	@$(MAKE) --no-print-directory SAN=address,undefined $(SAN_TESTS:%=build-address/tests/%)
	@$(MAKE) --no-print-directory SAN=thread $(TSAN_TESTS:%=build-thread/tests/%)
	@$(MAKE) --no-print-directory PORTABLE=1 $(PORTABLE_TESTS:%=build-portable/tests/%)
	@SAN_TESTS="$(SAN_TESTS)" TSAN_TESTS="$(TSAN_TESTS)" PORTABLE_TESTS="$(PORTABLE_TESTS)" \
	    scripts/run-tests.sh $(BUILD)

test: deps
	@$(MAKE) --no-print-directory check-tests

# The binary and the manual page (singletrain.1); DESTDIR stages a package.
install: $(BIN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/singletrain
	install -m 644 singletrain.1 $(DESTDIR)$(PREFIX)/share/man/man1/singletrain.1

clean:
	rm -rf build build-address build-thread build-fuzz

# libFuzzer targets of the readers (clang): make fuzz, make fuzz-build.
include mk/fuzz.mk

-include $(OBJ:.o=.d)
