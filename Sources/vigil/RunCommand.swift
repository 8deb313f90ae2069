import Agent
import Capture
import Configuration
import FoundationEssentials
import H264
import Logging
import MQTT
import Media
import POSIX
import RTSP
import Recorder
import Storage
import Upload
import Web

/// `vigil run [--config FILE]`: the agent, and the composition root: the one place that makes
/// the machine's own environment (devices, disk, stderr, sd_notify, signals), the one logger,
/// the encoders and the sinks, and hands them to the agent.
enum RunCommand: Command {
    static let name = "run"
    static let abstract = "Run the recorder agent."
    static let synopsis = "[--config FILE]"
    static let discussion = """
        Watches the camera named by camera.device, keeps the last recording.pre_roll seconds
        of encoded video in memory, and records each motion event into a clip under
        storage.path, from before the motion to recording.post_roll after it. Logs go to
        stderr (the journal under systemd).

        SIGTERM or SIGINT finish the open clip and exit 0. SIGHUP reloads the configuration
        (an invalid file is logged and the settings in use are kept). With a file: source the
        agent exits once the file has been read and its last clip closed.

        Exit status: 0 on a clean stop; 78 for an invalid configuration; 66 when the source
        cannot be opened; 69 when camera.device is a libcamera camera and the vigil-libcamera
        package is missing or of another version; 73 when the storage directory cannot be created; 75 when another
        agent records into it, or another agent on this machine has the same camera.name; 65 when a file source turns out to be malformed part-way (the
        clips before are kept); 71 when the system refuses the agent a thread. A storage
        directory that is not there yet (a disk not mounted) or not writable is waited for.
        """
    static let options = [configOption]

    static func run(_ arguments: ParsedArguments) throws(UsageError) -> ExitCode {
        // First of all, before anything is made: a SIGTERM or SIGHUP that comes while the agent
        // starts waits for the agent to take it (a clean stop, a reload) instead of ending it.
        Signals.block()
        guard let (path, settings) = loadSettings(arguments) else { return .config }
        // A libcamera camera without its plugin cannot come back by waiting: say what to install.
        if case .libcamera = settings.camera.device, let problem = LibcameraAvailability.problem() {
            printError("vigil run: \(path): \(problem)")
            return .unavailable
        }
        let log = Logger.agent(settings, sink: StderrLogSink())
        let selection = chooseEncoder(settings)
        guard let encoders = selection.choice(x264: settings.encoder.x264, hardware: settings.encoder.hardware)
        else {
            if case .configurationError(let problem) = selection { printError("vigil run: \(path): \(problem)") }
            return .config
        }
        var environment = systemEnvironment(encoders: encoders, log: log)
        // Uploads: a queue in the storage directory, sent by a thread of their own. Made before
        // MQTT, so Home Assistant hears of a backlog only when there is one to report.
        var uploadSink: UploadSink?
        if settings.upload.enabled {
            do {
                uploadSink = try UploadSink(
                    settings: settings.upload, camera: settings.camera.name, log: log, timeZone: SystemTimeZone(),
                    clock: environment.clock)
            } catch {
                log.error(
                    "uploads off: they cannot be set up; recording goes on without them",
                    [("error", .string(error.description))])
            }
        }
        // MQTT is an add-on: when it cannot run (a password file not there yet), the agent
        // records without it and says so. Its connection is made in the background.
        if settings.mqtt.enabled {
            if let problem = settings.mqtt.problem {
                log.error(
                    "MQTT off: a file it needs cannot be read; recording goes on without it — fix it, then restart",
                    [("problem", .string(problem.description))])
            } else {
                do {
                    environment.sinks.append(
                        try MQTTSink(
                            settings: settings.mqtt, camera: settings.camera.name, log: log, timeZone: SystemTimeZone(),
                            control: environment.control, version: version,
                            linkBase: settings.web.linkBase(host: HostName.current),
                            livePictures: settings.snapshot.liveInterval > 0, uploads: uploadSink != nil,
                            clock: environment.clock))
                } catch {
                    log.error(
                        "MQTT off: the client cannot be made; recording goes on without it",
                        [("error", .string(error.description))])
                }
            }
        }
        // The RTSP server first: ONVIF's stream is its, on the port it took. One that cannot
        // start is said, and recording goes on without it.
        var rtspPort: Int?
        if settings.rtsp.enabled, let problem = settings.rtsp.problem {
            log.error(
                "rtsp server off: a file it needs cannot be used; recording goes on without it — fix it, then restart",
                [("problem", .string(problem.description))])
        } else if settings.rtsp.enabled {
            do {
                let sink = try RTSPSink(
                    settings: settings.rtsp, camera: settings.camera.name, sound: settings.audio.enabled, log: log)
                environment.sinks.append(sink)
                rtspPort = sink.port
            } catch {
                log.error(
                    "rtsp server off: it cannot start; recording goes on without it — fix what the error says, then restart",
                    [("error", .string(error.description))])
            }
        }
        // The web server too: a port already taken is said, and recording goes on without it.
        // A certificate out of its dates is served, and said.
        if settings.web.enabled, let warning = settings.web.certificateWarning {
            var data: [(String, LogValue)] = [("file", .string(settings.web.tlsCertFile ?? ""))]
            if let notBefore = settings.web.certificateNotBefore, let notAfter = settings.web.certificateNotAfter {
                data += [
                    ("not_before", .string(Settings.Web.dateText(notBefore))),
                    ("not_after", .string(Settings.Web.dateText(notAfter))),
                ]
            }
            log.warning(
                "web server certificate expired, not valid yet, or ending soon: renew it, then restart",
                data + [("problem", .string(warning.message))])
        }
        if settings.web.enabled, let problem = settings.web.problem {
            log.error(
                "web server off: a file it needs cannot be used; recording goes on without it — fix it, then restart",
                [("problem", .string(problem.description))])
        } else if settings.web.enabled {
            do {
                let onvif = onvifDevice(settings, version: version, rtspPort: rtspPort, log: log)
                let web = try WebSink(
                    settings: settings.web, camera: settings.camera.name, version: version,
                    storage: DiskStorage(root: settings.storage.path), onvif: onvif,
                    onvifPasswords: settings.onvif.passwords, log: log)
                environment.sinks.append(web)
                if let onvif, let discovery = onvifDiscovery(settings, device: onvif, webPort: web.port, log: log) {
                    environment.sinks.append(discovery)
                }
            } catch {
                log.error(
                    "web server off: it cannot start; recording goes on without it — fix what the error says, then restart",
                    [("error", .string(error.description))])
            }
        }
        if let uploadSink { environment.sinks.append(uploadSink) }
        switch Agent(configPath: path, settings: settings, version: version, environment: environment).run() {
        case .stopped: return .success
        case .sourceCannotOpen: return .noInput
        case .storageCannotBeCreated: return .cannotCreate
        case .storageInUse, .cameraInUse: return .temporaryFailure
        case .sourceFailed: return .dataError
        }
    }

    /// The machine's own: V4L2 cameras and ALSA microphones (or the synthetic ones), the disk,
    /// stderr (the journal under systemd), sd_notify, signals.
    static func systemEnvironment(encoders: EncoderChoice, log: Logger) -> AgentEnvironment {
        var environment = AgentEnvironment(
            encoders: encoders.fallback,
            openSource: { camera throws(CaptureError) in
                try SourceOpener.open(
                    camera.device, width: camera.width, height: camera.height, fps: camera.fps,
                    purpose: .recording(realtime: camera.realtime))
            },
            openMicrophone: { audio, log throws(CaptureError) in
                if audio.device == "synthetic" {
                    return SyntheticAudioSource(sampleRate: audio.rate, channels: audio.channels)
                }
                let microphone = try ALSAMicrophone(
                    device: audio.device, sampleRate: audio.rate, channels: audio.channels)
                log.info(
                    "microphone negotiated",
                    [
                        ("device", .string(microphone.name)), ("rate", .int(microphone.sampleRate)),
                        ("requested_rate", .int(microphone.requestedRate)), ("channels", .int(microphone.channels)),
                        ("period_frames", .int(microphone.periodFrames)),
                        ("buffer_frames", .int(microphone.bufferFrames)),
                        ("driver_timestamps", .bool(microphone.driverTimestamps)),
                    ])
                return microphone
            },
            storage: { DiskStorage(root: $0) },
            log: log,
            triggerDirectories: TriggerSocket.directories(),
            handlesSignals: true,
            notifier: SystemdNotifier(environment: ProcessInfo.processInfo.environment),
            clock: .monotonic,
            wallNow: { Date() })
        environment.encoders = encoders
        return environment
    }
}

/// The encoder `encoder.backend` and `encoder.device` make of the memory-to-memory devices
/// there are (only looked for when the hardware encoder may be used).
func chooseEncoder(_ settings: Settings) -> EncoderSelection {
    var paths = DeviceProbe.cameraPaths()
    if let device = settings.encoder.device, !paths.contains(device) { paths.append(device) }
    let devices = settings.encoder.backend == .x264 ? [] : M2MSession.devices(among: paths)
    return EncoderSelection.choose(
        backend: settings.encoder.backend, device: settings.encoder.device, devices: devices,
        width: settings.camera.width, height: settings.camera.height)
}
