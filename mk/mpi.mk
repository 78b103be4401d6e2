# The MPI all-reduce module (src/dist/allreduce/, include/dist/allreduce.h), its test
# and its benchmark driver, compiled with mpicc. Included by the Makefile,
# which provides BUILD, ALLREDUCE_SRC, CFLAGS (with -Iinclude) and LDFLAGS.
#   make $(BUILD)/libst_allreduce.a     the module, to link into the trainer
#   make mpi-tests                      the test and benchmark programs
#   make test-mpi                       build them, run tests/mpi/test_allreduce.sh
# Objects go under $(BUILD)/mpi/ so that they never meet the plain-$(CC)
# pattern rule for $(BUILD)/%.o. status.c, strlist.c and the algorithms' names
# (names.c) are compiled again there because the test programs link only the module,
# not libsingletrain.a.

MPICC ?= mpicc
# Keep the including Makefile's default goal (the rules below are not it).
mpi_saved_default_goal := $(.DEFAULT_GOAL)

ALLREDUCE_OBJ := $(ALLREDUCE_SRC:%.c=$(BUILD)/mpi/%.o)
ALLREDUCE_LIB := $(BUILD)/libst_allreduce.a
MPI_TEST_BIN := $(BUILD)/tests/mpi/test_allreduce $(BUILD)/tests/mpi/bench_allreduce
MPI_TEST_DEPS := $(BUILD)/mpi/src/base/status.o $(BUILD)/mpi/src/base/strlist.o \
                 $(BUILD)/mpi/src/dist/allreduce/names.o $(ALLREDUCE_LIB)

.PHONY: mpi-tests test-mpi

$(BUILD)/mpi/%.o: %.c
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -c $< -o $@

$(ALLREDUCE_LIB): $(ALLREDUCE_OBJ)
	@rm -f $@
	ar rcs $@ $^

# Explicit rules, so the Makefile's $(BUILD)/tests/% pattern (plain $(CC),
# cmocka, libsingletrain.a) is not used for these.
$(BUILD)/tests/mpi/test_allreduce: $(BUILD)/mpi/tests/mpi/test_allreduce.o $(MPI_TEST_DEPS)
	@mkdir -p $(dir $@)
	$(MPICC) $(LDFLAGS) -o $@ $^ -lm

$(BUILD)/tests/mpi/bench_allreduce: $(BUILD)/mpi/tests/mpi/bench_allreduce.o $(MPI_TEST_DEPS)
	@mkdir -p $(dir $@)
	$(MPICC) $(LDFLAGS) -o $@ $^ -lm

mpi-tests: $(MPI_TEST_BIN)

test-mpi: mpi-tests
	sh tests/mpi/test_allreduce.sh $(BUILD)

# scripts/run-tests.sh runs every tests/test_*.sh, test_allreduce.sh too:
# make check-tests builds its program first wherever mpicc is installed.
ifneq ($(shell command -v $(MPICC) 2>/dev/null),)
check-tests: $(BUILD)/tests/mpi/test_allreduce
endif

-include $(ALLREDUCE_OBJ:.o=.d) $(BUILD)/mpi/src/base/status.d $(BUILD)/mpi/src/base/strlist.d \
    $(BUILD)/mpi/src/dist/allreduce/names.d \
    $(BUILD)/mpi/tests/mpi/test_allreduce.d $(BUILD)/mpi/tests/mpi/bench_allreduce.d

.DEFAULT_GOAL := $(mpi_saved_default_goal)
