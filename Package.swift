// swift-tools-version:6.0
import PackageDescription

// Pure-Swift modules (Media, QuickTime, MotionDetection, Analysis, Recorder) import no C module.
// Adapters (POSIX, V4L2, H264, Capture, Configuration, Storage, Snapshot, Overlay, MQTT, Web, Upload) reach C only
// through the C* system libraries or Glibc, with `internal import`, so no C type can appear in a public signature.
// Agent, MQTT, Web, Upload and `vigil` import no Glibc: the operating system is POSIX's (`make lint` checks all this).
// Nothing the `vigil` product links imports Foundation: FoundationEssentials only, so the
// binary carries neither ICU nor CoreFoundation.
// VIGIL_NO_LIBCAMERA_PLUGIN=1 leaves the libcamera plugin out of the package: the aarch64 test
// build of `make test-arm64` is cross-compiled in a root that has libcamera-dev for amd64 only.
let libcameraPlugin = Context.environment["VIGIL_NO_LIBCAMERA_PLUGIN"] == nil

let package = Package(
    name: "Vigil",
    products: [
        .executable(name: "vigil", targets: ["vigil"]),
        // A stand-in for the libcamera plugin, with memfd buffers: CaptureTests' LibcameraSource tests.
        .library(name: "vigil-libcamera-fake", type: .dynamic, targets: ["FakeLibcamera"]),
    ],
    targets: [
        // C libraries from Debian, found through pkg-config.
        .systemLibrary(name: "CX264", pkgConfig: "x264", providers: [.apt(["libx264-dev"])]),
        .systemLibrary(name: "CV4L2", pkgConfig: "libv4l2", providers: [.apt(["libv4l-dev"])]),
        .systemLibrary(name: "CALSA", pkgConfig: "alsa", providers: [.apt(["libasound2-dev"])]),
        .systemLibrary(name: "CLibconfig", pkgConfig: "libconfig", providers: [.apt(["libconfig-dev"])]),
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
        .systemLibrary(name: "CTurboJPEG", pkgConfig: "libturbojpeg", providers: [.apt(["libturbojpeg0-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        // The web server's certificate, read for its dates (libmicrohttpd speaks TLS through it).
        .systemLibrary(name: "CGnuTLS", pkgConfig: "gnutls", providers: [.apt(["libgnutls28-dev"])]),
        .systemLibrary(name: "COpus", pkgConfig: "opus", providers: [.apt(["libopus-dev"])]),
        // The clip catalogue (SQLite, in WAL mode).
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // libcamera (C++), for the plugin only.
        .systemLibrary(name: "CLibcamera", pkgConfig: "libcamera", providers: [.apt(["libcamera-dev"])]),
        // Linux calls glibc does not wrap for Swift (a thread's I/O and CPU priority).
        .systemLibrary(name: "CLinux"),
        // The plugin's C ABI (a header, and dlopen): what Capture sees of libcamera.
        .systemLibrary(name: "CLibcameraPlugin"),

        // Pure Swift.
        .target(name: "Logging", dependencies: ["Media"]),
        .target(name: "Media"),
        .target(name: "QuickTime", dependencies: ["Media"]),
        .target(name: "MotionDetection", dependencies: ["Media"]),
        .target(name: "Recorder", dependencies: ["Media", "QuickTime"]),
        // `vigil analyze`: detection and the event logic over a whole source; JSON, CSV, SVG.
        .target(name: "Analysis", dependencies: ["Media", "MotionDetection", "Recorder"]),
        // ONVIF's messages: a small bounded XML reader (no DTD), SOAP requests and WS-Security's
        // UsernameToken, the device and media services' answers, WS-Discovery's probes and replies.
        .target(name: "ONVIF", dependencies: ["Media"]),

        // Adapters.
        // The operating system at the edge: errors, retrying interrupted calls, file descriptors
        // that close themselves, the durable file replace, Unix sockets and the web server's TCP
        // socket, threads (their signal masks and priority) and conditions, signals, sd_notify,
        // posix_spawn, the system time zone, the monotonic clock (`Clock`, read as Media's `Timestamp`).
        .target(name: "POSIX", dependencies: ["Media", "CLinux"]),
        // V4L2 devices, for the cameras and the hardware encoder alike: the node, its
        // capabilities, its memory-mapped buffers, and what each call's errors mean.
        .target(name: "V4L2", dependencies: ["Media", "POSIX", "CV4L2"]),
        .target(name: "H264", dependencies: ["Media", "POSIX", "V4L2", "CX264", "CV4L2"]),
        .target(name: "Capture", dependencies: ["Media", "POSIX", "V4L2", "CV4L2", "CALSA", "CLibcameraPlugin"]),
        .target(
            name: "Configuration",
            dependencies: [
                "CLibconfig", "CGnuTLS", "Logging", "Capture", "H264", "MotionDetection", "Media", "Overlay", "POSIX",
            ]),
        // The storage directory on disk (Recorder's ClipStorage) and movie files, with POSIX calls.
        .target(name: "Storage", dependencies: ["Media", "POSIX", "QuickTime", "Recorder", "CSQLite"]),
        // Event snapshots: a downscaled copy of a 4:2:0 frame, encoded as JPEG with libturbojpeg.
        .target(name: "Snapshot", dependencies: ["Media", "CTurboJPEG"]),
        // Text drawn into the picture (the time, the camera's name) in a PSF console font,
        // read through zlib.
        .target(name: "Overlay", dependencies: ["Media", "CZlib"]),

        // The agent: the pipeline, the clip writer and their decisions, its threads, queues and
        // stop order (on POSIX's threads, signals and sd_notify). It knows the disk only as
        // Recorder's ClipStorage: `vigil run` passes it DiskStorage.
        .target(
            name: "Agent",
            dependencies: [
                "Media", "POSIX", "QuickTime", "MotionDetection", "Recorder", "Capture", "Configuration",
                "Logging", "Snapshot", "Overlay",
            ]
        ),
        // Events to an MQTT broker (libmosquitto), and Home Assistant: an `EventSink`.
        .target(
            name: "MQTT",
            dependencies: [
                "Agent", "Capture", "Configuration", "Logging", "Media", "POSIX", "Recorder", "CMosquitto",
            ]),
        // The agent's web server: HTTP on libmicrohttpd, on threads of its own (`HTTPServer`),
        // serving the clips, their pictures and the agent's figures (`WebSite`): an `EventSink`.
        // The live stream's sound is encoded here, for viewers only (Opus, libopus).
        .target(
            name: "Web",
            dependencies: [
                "Agent", "Configuration", "Logging", "Media", "ONVIF", "POSIX", "QuickTime", "Recorder", "Snapshot",
                "CMicroHTTPD", "COpus",
            ]),
        // Clips off the board: each saved clip copied to an S3-compatible bucket, an SFTP server or a
        // WebDAV share (libcurl), on a thread of its own, from a queue kept in the storage
        // directory (`uploads.jsonl`): an `EventSink`.
        .target(
            name: "Upload",
            dependencies: [
                "Agent", "Configuration", "Logging", "Media", "POSIX", "QuickTime", "Recorder", "CCurl",
            ]),
        // The camera's H.264 over RTSP (a server of our own, on a thread of its own), fed the frames
        // of the live feed: an `EventSink`.
        .target(
            name: "RTSP",
            dependencies: ["Agent", "Configuration", "Logging", "Media", "POSIX", "QuickTime", "Web"]),
        // The `vigil` command: one file per subcommand, parsing arguments and calling libraries.
        .executableTarget(
            name: "vigil",
            dependencies: [
                "Agent", "Analysis", "Media", "QuickTime", "Recorder", "H264", "Capture", "Configuration", "Storage",
                "MQTT", "Web", "Upload", "RTSP", "ONVIF", "POSIX", "Logging",
            ]
        ),

        // Measures the pipeline (`make bench`).
        .executableTarget(
            name: "vigil-bench",
            dependencies: [
                "Media", "POSIX", "QuickTime", "Storage", "MotionDetection", "Recorder", "H264", "Capture",
                "Configuration", "Overlay", "Agent", "Web", "RTSP", "Logging",
            ]
        ),

        // Tests.
        .target(
            name: "TestSupport",
            dependencies: ["Media", "POSIX", "QuickTime", "Recorder", "Storage", "Capture", "Overlay"],
            path: "Tests/TestSupport"),
        // The agent run in process with its threads, for AgentTests and MQTTTests.
        .target(
            name: "AgentTestSupport",
            dependencies: [
                "Agent", "Capture", "Configuration", "H264", "Logging", "Media", "POSIX", "QuickTime", "Recorder",
                "TestSupport",
            ],
            path: "Tests/AgentTestSupport"),
        .executableTarget(
            name: "movie-writer-child", dependencies: ["Media", "QuickTime", "Recorder", "TestSupport"],
            path: "Tests/Fixtures/MovieWriterChild"),
        .target(name: "FakeLibcamera", path: "Tests/Fixtures/FakeLibcamera"),
        .executableTarget(name: "y4m-feeder", dependencies: ["Capture", "Media"], path: "Tests/Fixtures/Y4MFeeder"),
        .testTarget(name: "MediaTests", dependencies: ["Media", "TestSupport"]),
        .testTarget(name: "POSIXTests", dependencies: ["POSIX", "Media"]),
        .testTarget(name: "QuickTimeTests", dependencies: ["QuickTime", "Storage", "Media", "TestSupport"]),
        .testTarget(
            name: "H264Tests",
            dependencies: ["H264", "V4L2", "Media", "QuickTime", "Storage", "Capture", "TestSupport"]),
        .testTarget(name: "CaptureTests", dependencies: ["Capture", "V4L2", "Media", "POSIX", "TestSupport"]),
        .testTarget(
            name: "MotionDetectionTests",
            dependencies: ["MotionDetection", "Media", "Capture", "Configuration", "TestSupport"]),
        .testTarget(
            name: "AnalysisTests",
            dependencies: [
                "Analysis", "MotionDetection", "Recorder", "Media", "Capture", "Configuration", "TestSupport",
            ]),
        .testTarget(
            name: "RecorderTests",
            dependencies: ["Recorder", "Storage", "Media", "QuickTime", "Logging", "TestSupport"]),
        .testTarget(name: "StorageTests", dependencies: ["Storage", "Recorder", "QuickTime", "Media", "TestSupport"]),
        .testTarget(name: "LoggingTests", dependencies: ["Logging", "Media"]),
        .testTarget(name: "ONVIFTests", dependencies: ["ONVIF", "Media"]),
        // Against the real server on a loopback port, with curl and raw sockets as clients.
        .testTarget(
            name: "WebTests",
            dependencies: [
                "Web", "Agent", "Configuration", "Logging", "Media", "ONVIF", "POSIX", "Recorder", "TestSupport",
            ]),
        .testTarget(name: "SnapshotTests", dependencies: ["Snapshot", "Media", "TestSupport"]),
        .testTarget(
            name: "RTSPTests",
            dependencies: ["RTSP", "Agent", "Configuration", "Logging", "Media", "QuickTime", "TestSupport"]),
        .testTarget(
            name: "OverlayTests",
            dependencies: [
                "Overlay", "Media", "H264", "QuickTime", "Storage", "Capture", "Configuration", "TestSupport",
            ]),
        .testTarget(name: "ConfigurationTests", dependencies: ["Configuration", "TestSupport"]),
        .testTarget(
            name: "AgentTests",
            dependencies: [
                "Agent", "Media", "Capture", "Configuration", "H264", "Logging", "QuickTime", "Recorder", "TestSupport",
                "Overlay", "POSIX", "AgentTestSupport",
            ]),
        // Against a real `mosquitto` broker the tests start on a loopback port.
        .testTarget(
            name: "MQTTTests",
            dependencies: [
                "MQTT", "Agent", "Configuration", "H264", "Media", "Capture", "Logging", "POSIX", "Recorder",
                "TestSupport", "AgentTestSupport",
            ]),
        // Against real servers on loopback: SeaweedFS (S3), OpenSSH (SFTP), wsgidav (WebDAV).
        .testTarget(
            name: "UploadTests",
            dependencies: [
                "Upload", "Agent", "AgentTestSupport", "Capture", "Configuration", "Logging", "Media", "Recorder",
                "Storage", "TestSupport", "Web",
            ]),
        // Runs the built `vigil` binary as a user would.
        .testTarget(
            name: "CommandTests", dependencies: ["QuickTime", "Storage", "Media", "Capture", "Recorder", "TestSupport"]),
        // The fault suite (`make test-faults`): SIGKILL, a full
        // disk, failing sources, broken configurations and input, a soak. `make test` skips it.
        .testTarget(
            name: "FaultTests", dependencies: ["QuickTime", "Storage", "Media", "Capture", "Recorder", "TestSupport"]),
        // Real-driver tests (`make test-devices`): run inside a VM booted with the kernel's vivid
        // and snd-aloop drivers (scripts/vm), then checked on the host. An executable, not a test
        // target, so that `swift test` on a machine without those devices never runs it.
        .executableTarget(
            name: "vigil-device-tests",
            dependencies: ["Capture", "H264", "V4L2", "Media", "POSIX", "CV4L2", "CALSA", "TestSupport"],
            path: "Tests/DeviceTests"),
    ],
    swiftLanguageModes: [.v6],
    cxxLanguageStandard: .cxx17
)

if libcameraPlugin {
    // The libcamera plugin (package vigil-libcamera), dlopened by `vigil`, which does not link
    // libcamera: libcamera's ABI changes with every release. libvigil-libcamera.so: libcamera's
    // cameras behind the C table of CLibcameraPlugin.
    package.products.append(.library(name: "vigil-libcamera", type: .dynamic, targets: ["VigilLibcamera"]))
    package.targets.append(.target(name: "VigilLibcamera", dependencies: ["CLibcamera"]))
}
