# pinfer — build, test, demo.
#
#   make            release build: build/release/pinfer, libpinfer.a and libpinfer.so
#   make install    install header, libraries, pinfer.pc and the binary under PREFIX (default
#                   /usr/local; DESTDIR is honoured)
#   make test       every test: release, ASan+UBSan, and the NEON build under qemu
#   make asan       the ASan+UBSan build and its tests only
#   make neon       the aarch64 cross build and its tests under qemu-aarch64
#   make demo       build, then show what pinfer does on a model it generates
#   make fuzz       libFuzzer build of the GGUF reader (clang); run: make fuzz-run FUZZ_SECONDS=600
#                   and of the hwprobe file, plan file, tokenizers and stats files: make fuzz-run-hwfile / -plan /
#                   -tokenizer / -stats
#   make bench      kernel throughput benchmark (pinfer bench-kernels)
#
# Missing Debian packages are installed by scripts/deps.sh when run as root.

MODE  ?= release
PREFIX ?= /usr/local
VERSION := $(shell sed -n 's/^\#define PI_VERSION_STRING "\(.*\)"/\1/p' include/pinfer.h)
VERSION_MAJOR := $(firstword $(subst ., ,$(VERSION)))
BUILD ?= build/$(MODE)
CC    ?= cc
AR    ?= ar

MACHINE := $(shell $(CC) -dumpmachine 2>/dev/null)
ifneq (,$(findstring x86_64,$(MACHINE)))
  ARCH := x86_64
else ifneq (,$(findstring aarch64,$(MACHINE)))
  ARCH := aarch64
else
  ARCH := other
endif

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith \
           -Wformat=2 -Wvla -Werror=implicit-function-declaration -Werror=incompatible-pointer-types
# -fPIC and hidden visibility: the same objects make libpinfer.a and
# libpinfer.so, which exports only what include/pinfer.h marks PI_API.
CFLAGS_COMMON := -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -pthread $(WARN) -fno-strict-aliasing -fPIC -fvisibility=hidden
LDLIBS  := -lm -pthread

# liburing is optional: without it (e.g. the static aarch64 cross build) the I/O
# engine reads with its pread threads instead of io_uring. The probe links, so a
# cross compiler that sees the host's header but has no library says no.
HASH := \#
HAVE_URING := $(shell printf '$(HASH)include <liburing.h>\nint main(void) { struct io_uring r; return io_uring_queue_init(1, &r, 0); }\n' | \
  $(CC) -x c - -o /dev/null $(if $(filter neon,$(MODE)),-static) -luring >/dev/null 2>&1 && echo 1)
ifeq ($(HAVE_URING),1)
  CFLAGS_COMMON += -DPI_HAVE_LIBURING
  LDLIBS += -luring
endif

# cJSON (libcjson-dev) writes the tools' JSON output (bench -o json, inspect
# --json) and reads it back in the tests; only the tools and tests link it,
# never libpinfer. Optional like liburing: without it (the static aarch64
# cross build) JSON output is refused with a message.
HAVE_CJSON := $(shell printf '$(HASH)include <cjson/cJSON.h>\nint main(void) { cJSON_Delete(cJSON_CreateObject()); return 0; }\n' | \
  $(CC) -x c - -o /dev/null $(if $(filter neon,$(MODE)),-static) -lcjson >/dev/null 2>&1 && echo 1)
ifeq ($(HAVE_CJSON),1)
  TOOL_CFLAGS := -DPI_HAVE_CJSON
  TOOL_LDLIBS := -lcjson
endif

# libmicrohttpd (libmicrohttpd-dev) is the HTTP server of `pinfer serve`,
# with cJSON for its JSON; only the tools link it. Without either (the
# static aarch64 cross build) `serve` says what to install.
HAVE_MHD := $(shell printf '$(HASH)include <microhttpd.h>\nint main(void) { return MHD_is_feature_supported(MHD_FEATURE_THREADS); }\n' | \
  $(CC) -x c - -o /dev/null $(if $(filter neon,$(MODE)),-static) -lmicrohttpd >/dev/null 2>&1 && echo 1)
ifeq ($(HAVE_MHD)$(HAVE_CJSON),11)
  TOOL_CFLAGS += -DPI_HAVE_SERVE
  TOOL_LDLIBS += -lmicrohttpd
endif

ifeq ($(MODE),release)
  OPT := -O2 -g
else ifeq ($(MODE),asan)
  # -O2: the checks stay on every access, and the suite runs in well under
  # half of -O1's time (the kernels' many small loads dominate at -O1).
  # -g1: line tables only, all a sanitizer's stack trace names; full -g made
  # GCC spend a third more time on the unrolled SIMD kernels (152 s against
  # 99 s for x86_avx512_down.c)
  OPT := -O2 -g1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
else ifeq ($(MODE),neon)
  OPT := -O2 -g
  LDFLAGS += -static
else
  OPT := -O2 -g
endif

CFLAGS ?=
ALL_CFLAGS := $(CFLAGS_COMMON) $(OPT) $(CFLAGS)

# Library sources: every .c under src/, minus kernels of other architectures.
LIB_SRC := $(sort $(wildcard src/*/*.c))
ifneq ($(ARCH),x86_64)
  LIB_SRC := $(filter-out src/kernels/x86_%.c,$(LIB_SRC))
endif
ifneq ($(ARCH),aarch64)
  LIB_SRC := $(filter-out src/kernels/arm_%.c,$(LIB_SRC))
endif
# the slowest to compile first, so that a parallel build is not left waiting on it
SLOW_SRC := $(filter src/kernels/x86_avx512_down.c src/kernels/x86_avx512.c,$(LIB_SRC))
LIB_SRC := $(SLOW_SRC) $(filter-out $(SLOW_SRC),$(LIB_SRC))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
LIB     := $(BUILD)/libpinfer.a
SOLIB   := $(BUILD)/libpinfer.so

# Per-ISA flags: only these files contain intrinsics; dispatch is at run time.
ISA_avx2   := -mavx2 -mfma -mf16c
ISA_avx512 := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni
ISA_amx    := $(ISA_avx512) -mamx-tile -mamx-int8
ISA_neon   := -march=armv8.2-a+dotprod+fp16
$(BUILD)/src/kernels/x86_avx2.o:   ISA := $(ISA_avx2)
$(BUILD)/src/kernels/x86_avx512.o: ISA := $(ISA_avx512)
$(BUILD)/src/kernels/x86_amx.o:    ISA := $(ISA_amx)
$(BUILD)/src/kernels/arm_neon.o:   ISA := $(ISA_neon)
$(BUILD)/src/kernels/x86_avx2_down.o:   ISA := $(ISA_avx2)
$(BUILD)/src/kernels/x86_avx512_down.o: ISA := $(ISA_avx512)
$(BUILD)/src/kernels/arm_neon_down.o:   ISA := $(ISA_neon)
ifeq ($(MODE),asan)
# Where the CPU has AVX-512 the AVX2 tables run only in test_kernels, and
# GCC spent 43 and 31 s on these two files' unrolled loops under the
# sanitizers at -O2 (9 and 6 s at -O1; test_kernels 17.0 s, then 18.7 s).
$(BUILD)/src/kernels/x86_avx2.o $(BUILD)/src/kernels/x86_avx2_down.o: ALL_CFLAGS += -O1
endif

# The kernels' build id (pi_kernels_build_id): a hash of their sources and
# compile flags. hwprobe keeps it beside the kernel rates it measured, so
# that rates taken by another build are flagged when a plan reads them.
KERNEL_FILES := $(sort $(wildcard src/kernels/*.c src/kernels/*.h))
KERNELS_ID := $(shell (cat $(KERNEL_FILES); echo '$(CC) $(ALL_CFLAGS) $(ISA_avx512) $(ISA_neon)') | sha256sum | cut -c1-16)
$(BUILD)/src/kernels/dispatch.o: ALL_CFLAGS += -DPI_KERNELS_ID='"$(KERNELS_ID)"'
$(BUILD)/src/kernels/dispatch.o: $(KERNEL_FILES)

TOOL_SRC := $(sort $(wildcard tools/*.c))
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/%.o)
PINFER   := $(BUILD)/pinfer

TEST_SRC := $(sort $(wildcard tests/test_*.c))
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# The fuzz target doubles as a test: a plain main() replays the corpus through it.
FUZZ_REPLAY := $(BUILD)/tests/test_fuzz_gguf
FUZZ_REPLAY_HW := $(BUILD)/tests/test_fuzz_hwfile
FUZZ_REPLAY_PLAN := $(BUILD)/tests/test_fuzz_plan
FUZZ_REPLAY_TOK := $(BUILD)/tests/test_fuzz_tokenizer
FUZZ_REPLAY_STATS := $(BUILD)/tests/test_fuzz_stats

.PHONY: all lib install tests test asan neon demo fuzz fuzz-run fuzz-run-hwfile fuzz-run-plan fuzz-run-tokenizer \
        fuzz-run-stats bench clean deps
.DEFAULT_GOAL := all

# The static cross build (neon) makes no shared library.
ifeq ($(MODE),neon)
all: $(PINFER) $(LIB)
else
all: $(PINFER) $(LIB) $(SOLIB)
endif
lib: $(LIB)

# Objects depend on the Makefile too: its flags are part of what they are.
$(BUILD)/%.o: %.c Makefile
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ISA) -MMD -MP -c $< -o $@

$(TOOL_OBJ) $(TEST_BIN:%=%.o): ALL_CFLAGS += $(TOOL_CFLAGS)
# What the optional libraries made of the tools, rewritten when it changes,
# so that installing libmicrohttpd-dev or libcjson-dev after a build rebuilds
# the tools with them (the objects would otherwise count as up to date).
TOOL_CONFIG := $(BUILD)/tool-config
TOOL_CONFIG_TEXT := $(TOOL_CFLAGS) $(TOOL_LDLIBS)
$(shell mkdir -p $(BUILD) && (echo '$(TOOL_CONFIG_TEXT)' | cmp -s - $(TOOL_CONFIG) || echo '$(TOOL_CONFIG_TEXT)' > $(TOOL_CONFIG)))
$(TOOL_OBJ) $(TEST_BIN:%=%.o): $(TOOL_CONFIG)
# the page is assembled into the binary (.incbin)
$(BUILD)/tools/serve_page.o: tools/serve_page.html

$(LIB): $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(SOLIB): $(LIB_OBJ)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libpinfer.so.$(VERSION_MAJOR) -o $@ $^ $(LDLIBS)

# The pkg-config file for PREFIX; Libs.private lists what static linking needs.
define PC_TEXT
prefix=$(PREFIX)
includedir=$${prefix}/include
libdir=$${prefix}/lib

Name: pinfer
Description: LLM inference beyond memory on a few CPU cores (PowerInfer-2 design)
Version: $(VERSION)
Cflags: -I$${includedir}
Libs: -L$${libdir} -lpinfer
Libs.private: $(LDLIBS)
endef
export PC_TEXT

$(PINFER): $(TOOL_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(LIB) $(TOOL_LDLIBS) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(TOOL_LDLIBS) $(LDLIBS)

$(FUZZ_REPLAY): $(BUILD)/fuzz/fuzz_gguf.o $(BUILD)/fuzz/replay_main.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(FUZZ_REPLAY_HW): $(BUILD)/fuzz/fuzz_hwfile.o $(BUILD)/fuzz/replay_main.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(FUZZ_REPLAY_PLAN): $(BUILD)/fuzz/fuzz_plan.o $(BUILD)/fuzz/replay_main.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(FUZZ_REPLAY_TOK): $(BUILD)/fuzz/fuzz_tokenizer.o $(BUILD)/fuzz/replay_main.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(FUZZ_REPLAY_STATS): $(BUILD)/fuzz/fuzz_stats.o $(BUILD)/fuzz/replay_main.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

tests: $(TEST_BIN) $(FUZZ_REPLAY) $(FUZZ_REPLAY_HW) $(FUZZ_REPLAY_PLAN) $(FUZZ_REPLAY_TOK) $(FUZZ_REPLAY_STATS) $(PINFER)

# `make test` runs every suite it can build here and ends with "N passed, N failed".
test:
	@scripts/deps.sh test
	@scripts/test.sh

asan:
	@scripts/deps.sh asan
	@scripts/test.sh asan

neon:
	@scripts/deps.sh neon
	@scripts/test.sh neon

demo:
	@scripts/deps.sh demo
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh $(PINFER)

bench: all
	$(PINFER) bench-kernels

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/pinfer.h $(DESTDIR)$(PREFIX)/include/pinfer.h
	install -m 644 $(LIB) $(DESTDIR)$(PREFIX)/lib/libpinfer.a
	install -m 755 $(SOLIB) $(DESTDIR)$(PREFIX)/lib/libpinfer.so.$(VERSION)
	ln -sf libpinfer.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libpinfer.so.$(VERSION_MAJOR)
	ln -sf libpinfer.so.$(VERSION_MAJOR) $(DESTDIR)$(PREFIX)/lib/libpinfer.so
	printf '%s\n' "$$PC_TEXT" > $(DESTDIR)$(PREFIX)/lib/pkgconfig/pinfer.pc
	install -m 755 $(PINFER) $(DESTDIR)$(PREFIX)/bin/pinfer

FUZZ_BUILD := build/fuzz
fuzz:
	@scripts/deps.sh fuzz
	@mkdir -p $(FUZZ_BUILD)
	clang -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	  -o $(FUZZ_BUILD)/fuzz_gguf fuzz/fuzz_gguf.c src/gguf/*.c src/base/*.c src/kernels/types.c src/kernels/validate.c \
	  src/kernels/ref.c src/kernels/quant_k.c -lm -pthread
	clang -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	  -o $(FUZZ_BUILD)/fuzz_hwfile fuzz/fuzz_hwfile.c src/plan/hwfile.c src/base/*.c src/kernels/types.c -lm -pthread
	clang -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	  -o $(FUZZ_BUILD)/fuzz_plan fuzz/fuzz_plan.c src/plan/planfile.c src/base/*.c -lm -pthread
	clang -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	  -o $(FUZZ_BUILD)/fuzz_stats fuzz/fuzz_stats.c src/sparse/stats.c src/gguf/*.c src/base/*.c src/kernels/types.c \
	  -lm -pthread
	clang -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	  -o $(FUZZ_BUILD)/fuzz_tokenizer fuzz/fuzz_tokenizer.c src/tokenizer/*.c src/gguf/*.c src/base/*.c \
	  src/kernels/types.c -lm -pthread

FUZZ_SECONDS ?= 600
fuzz-run: fuzz
	@mkdir -p $(FUZZ_BUILD)/corpus
	scripts/fuzz-seeds.sh $(FUZZ_BUILD)/seeds
	$(FUZZ_BUILD)/fuzz_gguf -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=2048 \
	  -timeout=10 $(FUZZ_BUILD)/corpus $(FUZZ_BUILD)/seeds

fuzz-run-hwfile: fuzz
	@mkdir -p $(FUZZ_BUILD)/corpus-hwfile
	$(FUZZ_BUILD)/fuzz_hwfile -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -rss_limit_mb=2048 -timeout=10 \
	  -dict=fuzz/hwfile.dict $(FUZZ_BUILD)/corpus-hwfile fuzz/corpus/hwfile

fuzz-run-plan: fuzz
	@mkdir -p $(FUZZ_BUILD)/corpus-plan
	$(FUZZ_BUILD)/fuzz_plan -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -rss_limit_mb=2048 -timeout=10 \
	  $(FUZZ_BUILD)/corpus-plan fuzz/corpus/plan

fuzz-run-stats: fuzz
	@mkdir -p $(FUZZ_BUILD)/corpus-stats
	$(FUZZ_BUILD)/fuzz_stats -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
	  $(FUZZ_BUILD)/corpus-stats fuzz/corpus/stats

fuzz-run-tokenizer: fuzz
	@mkdir -p $(FUZZ_BUILD)/corpus-tokenizer
	$(FUZZ_BUILD)/fuzz_tokenizer -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -rss_limit_mb=2048 -timeout=10 \
	  $(FUZZ_BUILD)/corpus-tokenizer fuzz/corpus/tokenizer

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(TEST_BIN:%=%.d) $(BUILD)/fuzz/fuzz_gguf.d $(BUILD)/fuzz/replay_main.d \
  $(BUILD)/fuzz/fuzz_hwfile.d $(BUILD)/fuzz/fuzz_plan.d $(BUILD)/fuzz/fuzz_tokenizer.d $(BUILD)/fuzz/fuzz_stats.d
