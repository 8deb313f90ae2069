# Vigil — one Makefile for people and CI.
#   make run    install what is missing, build, run the agent on the demo config
#   make test   install what is missing, build, run every test (but the fault suite)
#   make test-faults   the fault suite: kills, full disks, failing sources, broken input
#   make soak   an hour of camera time through the agent: memory, files and disk stay flat
#   make bench  measure the pipeline and how the agent scales with its clips (prints the tables,
#               writes var/bench/bench.json); the scale rows alone:
#               make bench BENCH_ARGS="--only scale" (and --clips 0,10000 for fewer clips)
#   make test-instructions  the pipeline's instructions per frame beyond x264 (callgrind) against
#               the number kept in bench/instructions.txt: fails when they grew more than 10 %
#   make compare-motion  Vigil's motion detector beside Motion 4.5.1 on real footage (prints a table)
#   make deb    build the Debian package
#   make deb-libcamera  the vigil-libcamera package (Raspberry Pi camera modules), built against this
#               system's libcamera with its C++ compiler (no Swift needed)
#   make deb-arm64  the Raspberry Pi package (trixie, arm64), cross-built with Debian trixie's Swift
#   make test-arm64  that package on arm64 under qemu-user, its results beside x86-64's
#   make test-trixie  the whole suite with Debian trixie's Swift 6.0.3
#   make test-homeassistant  a real Home Assistant adds the camera (Generic Camera, ONVIF): picture, stream
#   make lint   check the formatting (.swift-format), the layering rules of docs/ARCHITECTURE.md,
#               what Swift 6.0 (Debian trixie's) cannot compile, no file over 600 lines and at most
#               45 pairs of repeated places (`duplicates`, where it is installed, boilerplate aside)
#   make format format the tree with the toolchain's swift format

SWIFT ?= $(shell command -v swift 2>/dev/null || echo /opt/swift/usr/bin/swift)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Libraries the build links, and the tools the tests use as independent readers.
BUILD_DEPS := pkg-config libsqlite3-dev libx264-dev libv4l-dev libasound2-dev libconfig-dev libmosquitto-dev libturbojpeg0-dev zlib1g-dev libmicrohttpd-dev libgnutls28-dev libopus-dev libcurl4-openssl-dev libcamera-dev
# What the agent reads at run time: the console font the timestamp overlay draws with.
RUN_DEPS := psf-unifont
TEST_DEPS := valgrind curl sqlite3 python3-venv openssh-server chromium console-setup-linux mosquitto mosquitto-clients openssl ffmpeg mediainfo gstreamer1.0-tools gstreamer1.0-plugins-good gstreamer1.0-plugins-bad gstreamer1.0-libav
# The device VM's libcamera scenario runs libcamera's own tools and compatibility layer, and udev
# (libcamera finds cameras through it), from this machine's root.
TEST_DEPS += libcamera-tools libcamera-ipa libcamera-v4l2 udev
SWIFT_FLAGS ?=

.PHONY: all deps test-deps build release test test-faults soak run bench test-instructions compare-motion deb test-deb clean check-swift lint format

all: build

check-swift:
	@[ -x "$(SWIFT)" ] || { echo "error: Swift 6 is not installed — get the toolchain for your system from https://www.swift.org/install/linux/ and put its usr/bin on PATH" >&2; exit 1; }

# Installs with apt-get only the packages that are missing: `deps` what building and running
# need (`make run`, `make deb`), `test-deps` the test tools as well (the readers, the broker,
# the servers, the browser: what only the tests use).
deps:
	@. ./scripts/apt-install.sh && apt_ensure "make deps" $(BUILD_DEPS) $(RUN_DEPS)

test-deps:
	@. ./scripts/apt-install.sh && apt_ensure "make test-deps" $(BUILD_DEPS) $(RUN_DEPS) $(TEST_DEPS)

build: deps check-swift
	$(SWIFT) build $(SWIFT_FLAGS)

release: deps check-swift
	$(SWIFT) build -c release $(SWIFT_FLAGS)

test: test-deps check-swift
	./scripts/test-servers.sh
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	$(SWIFT) test --skip-build --skip FaultTests $(SWIFT_FLAGS)

# The fault suite (Tests/FaultTests; needs root for the small tmpfs it fills): SIGKILL at
# random moments, a full disk, sources that stop or fail, broken configurations, corrupt
# input, and a soak of 10 minutes of camera time. One test at a time: some run in real time.
test-faults: test-deps check-swift
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	$(SWIFT) test --skip-build --no-parallel --filter FaultTests $(SWIFT_FLAGS)

# The soak alone, on SOAK_SECONDS of camera time fed as fast as the agent reads (an hour takes
# about two minutes on two cores): memory, open files and the clip store must stay flat.
SOAK_SECONDS ?= 3600
soak: test-deps check-swift
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	VIGIL_SOAK_SECONDS=$(SOAK_SECONDS) $(SWIFT) test --skip-build --filter FaultTests.SoakTests $(SWIFT_FLAGS)

run: build
	@./scripts/run-demo.sh "$$($(SWIFT) build $(SWIFT_FLAGS) --show-bin-path)"

# About 3 minutes: the pieces, then vigil run against x264 alone and ffmpeg on the same frames,
# then vigil run in real time at each size; then the scale rows, vigil run on directories of 0,
# 10,000 and 100,000 clips made in var/bench/scale (docs/design/performance.md says what each
# figure means and how long they take).
BENCH_ARGS ?=
bench: test-deps check-swift
	$(SWIFT) build -c release --static-swift-stdlib --product vigil $(SWIFT_FLAGS)
	$(SWIFT) build -c release --static-swift-stdlib --product vigil-bench $(SWIFT_FLAGS)
	@mkdir -p var/bench
	"$$($(SWIFT) build -c release --static-swift-stdlib $(SWIFT_FLAGS) --show-bin-path)/vigil-bench" --json var/bench/bench.json $(BENCH_ARGS)

# About a minute: `vigil run` on 3 s and 8 s of the bench's event scene at 640×480 under valgrind's
# callgrind, which counts instructions the same on every run; the instructions per frame beyond
# x264 against the last line for this architecture in bench/instructions.txt (CI runs it).
test-instructions: test-deps check-swift
	$(SWIFT) build -c release --static-swift-stdlib --product vigil $(SWIFT_FLAGS)
	$(SWIFT) build -c release --static-swift-stdlib --product vigil-bench $(SWIFT_FLAGS)
	"$$($(SWIFT) build -c release --static-swift-stdlib $(SWIFT_FLAGS) --show-bin-path)/vigil-bench" --instruction-gate bench/instructions.txt

# About 12 minutes: Vigil's detector (dynamic background on and off) beside Motion 4.5.1 (its smart
# mask off and on; installed with apt-get when missing, its service left off), on the tree and
# square footage of the real-footage tests and the tree with objects crossing; Motion watches
# each scene in real time (scripts/compare-motion.sh says how and what each figure means).
compare-motion: test-deps check-swift
	$(SWIFT) build -c release --static-swift-stdlib --product vigil $(SWIFT_FLAGS)
	VIGIL="$$($(SWIFT) build -c release --static-swift-stdlib $(SWIFT_FLAGS) --show-bin-path)/vigil" ./scripts/compare-motion.sh

# The Debian package, in $(DEB_OUT): a release build with the Swift runtime linked statically
# and full RELRO, packaged by packaging/build-deb.sh. DEB_SCRATCH is SwiftPM's build
# directory for it (e.g. DEB_SCRATCH=.build-deb keeps it apart from other builds).
DEB_SCRATCH ?= .build
DEB_OUT ?= dist
DEB_BUILD = $(SWIFT) build -c release --static-swift-stdlib --product vigil --scratch-path $(DEB_SCRATCH) \
	-Xlinker -z -Xlinker relro -Xlinker -z -Xlinker now $(SWIFT_FLAGS)
deb: deps check-swift
	$(DEB_BUILD)
	./packaging/build-deb.sh --out $(DEB_OUT) "$$($(DEB_BUILD) --show-bin-path)/vigil"

# The libcamera plugin's package, vigil-libcamera_VERSION_ARCH.deb in $(DEB_OUT), for this system:
# libcamera's ABI changes with every release, so build it where it will run (on the Pi, against
# Raspberry Pi OS's libcamera): it needs g++, pkg-config, libcamera-dev and dpkg-dev, not Swift.
.PHONY: deb-libcamera
deb-libcamera:
	./packaging/build-deb-libcamera.sh --out $(DEB_OUT)

# The Raspberry Pi package: vigil_VERSION_arm64.deb in $(DEB_OUT), for Raspberry Pi OS (trixie,
# 64-bit) and Debian trixie arm64, cross-built with Debian trixie's own Swift (6.0.3) in a trixie
# root that scripts/trixie/root.sh makes and keeps in ~/.cache/vigil-trixie (rebuilt when its
# inputs change); packaged there, so Depends names trixie's packages. Needs root (sudo otherwise).
# On a Pi with trixie's swiftlang installed, `make deb` makes the same package natively.
# deb-trixie-amd64 makes the x86-64 one for trixie, in $(DEB_OUT)/trixie.
.PHONY: deb-arm64 deb-trixie-amd64
deb-arm64:
	$(SUDO) ./scripts/trixie/build-deb.sh --out $(DEB_OUT) arm64

deb-trixie-amd64:
	$(SUDO) ./scripts/trixie/build-deb.sh --out $(DEB_OUT)/trixie amd64

# The Raspberry Pi package on arm64 trixie under qemu-user (needs root, uses sudo otherwise):
# lintian, apt install, vigil check, vigil analyze and vigil run on the synthetic scene and the
# real footage of the tests, compared with this machine's x86-64 build (the same scores, events
# and clips), and the pure modules' unit tests built for aarch64 and run under qemu-user
# (scripts/trixie/test-arm64.sh says what each step checks).
.PHONY: test-arm64
test-arm64: deb-arm64 build
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	$(SUDO) ./scripts/trixie/test-arm64.sh --deb-dir $(DEB_OUT) --x86 "$$($(SWIFT) build $(SWIFT_FLAGS) --show-bin-path)/vigil"

# The whole test suite with Debian trixie's Swift (6.0.3, the Raspberry Pi package's) in the
# trixie build root of scripts/trixie/root.sh, with trixie's readers, broker and fonts: every
# suite, then FaultTests one test at a time (needs root, uses sudo otherwise).
.PHONY: test-trixie
test-trixie:
	$(SUDO) ./scripts/trixie/test-suite.sh

# Tests the package as a user gets it (needs root, uses sudo otherwise): lintian, then in a
# fresh Debian bookworm made with debootstrap (cached in ~/.cache/vigil-test-deb): install
# with apt, check, record as user vigil, upgrade keeping an edited conffile, purge.
test-deb: deb
	$(SUDO) ./packaging/test-deb.sh --deb-dir $(DEB_OUT) "$$($(DEB_BUILD) --show-bin-path)/vigil"

# A real Home Assistant (2026.2.3, from PyPI, in the trixie root of scripts/trixie/root.sh, its
# venv kept in ~/.cache/vigil-homeassistant) adds this build's agents through Generic Camera's
# and ONVIF's config flows (ONVIF with a password too): the camera entity, its picture and its stream (HA's HLS read by ffprobe and
# ffmpeg) are checked. About a minute once cached; the first run makes the root and the venv
# (scripts/homeassistant/test.sh says more). Needs root (uses sudo otherwise).
.PHONY: test-homeassistant
test-homeassistant: build
	$(SUDO) ./scripts/homeassistant/test.sh "$$($(SWIFT) build $(SWIFT_FLAGS) --show-bin-path)/vigil"

# Real-driver tests: vivid (V4L2) and snd-aloop (ALSA) in a qemu VM booting Debian's kernel
# (scripts/vm/run-vm.sh installs qemu and fetches the kernel once, into ~/.cache/vigil-vm).
# About two minutes; results in var/device-tests/.
.PHONY: test-devices
test-devices: test-deps check-swift
	SWIFT="$(SWIFT)" SWIFT_FLAGS="$(SWIFT_FLAGS)" ./scripts/device-tests.sh

# Power cuts (scripts/powercut/run.sh says more; results in var/powercut/): in the same VM with
# dm-log-writes, states a power cut can leave on ext4 (data=ordered, data=writeback), vfat,
# exFAT and f2fs are checked, repaired and started on, and every clip must decode and keep
# every synced frame. test-powercut (CI) replays the states listed in
# scripts/powercut/states.list from the recordings kept in scripts/powercut/fixtures/: the
# same states on every run. test-powercut-explore records anew and draws new states (with
# SEED=N, else a new seed, printed; run it with a few seeds before submitting a change to the
# writer, repair or storage); powercut-record re-records the fixtures on purpose. Each takes
# 15-20 minutes on a busy 2-core machine.
.PHONY: test-powercut test-powercut-explore powercut-record
test-powercut: test-deps check-swift
	SWIFT="$(SWIFT)" SWIFT_FLAGS="$(SWIFT_FLAGS)" ./scripts/powercut/run.sh gate
test-powercut-explore: test-deps check-swift
	$(if $(SEED),POWERCUT_SEED="$(SEED)") SWIFT="$(SWIFT)" SWIFT_FLAGS="$(SWIFT_FLAGS)" ./scripts/powercut/run.sh explore
powercut-record: test-deps check-swift
	SWIFT="$(SWIFT)" SWIFT_FLAGS="$(SWIFT_FLAGS)" ./scripts/powercut/run.sh record

# The formatting is the toolchain's own formatter's (`swift format`, configured in .swift-format);
# the layering check is scripts/check-layering.sh; scripts/check-swift60.sh keeps out the shapes
# Debian trixie's Swift 6.0.3 (the Raspberry Pi package's) cannot compile; scripts/check-tree.sh
# holds files to 600 lines and the tree to 45 pairs of repeated places.
FORMATTED := Sources Tests Package.swift
lint: check-swift
	$(SWIFT) format lint --strict --recursive --parallel $(FORMATTED)
	./scripts/check-layering.sh
	./scripts/check-swift60.sh
	./scripts/check-tree.sh
	./scripts/check-links.sh

format: check-swift
	$(SWIFT) format --in-place --recursive --parallel $(FORMATTED)

clean:
	rm -rf .build var dist
