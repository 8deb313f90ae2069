import Agent
import Capture
import Configuration
import H264
import Logging
import MQTT

/// `vigil run [--config FILE]`: the agent.
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
        guard arguments.positionals.isEmpty else {
            throw UsageError(message: "unexpected argument \(arguments.positionals[0])")
        }
        // First of all, before anything is made: a SIGTERM or SIGHUP that comes while the agent
        // starts waits for the agent to take it (a clean stop, a reload) instead of ending it.
        Signals.block()
        guard let (path, settings) = loadSettings(arguments) else { return .config }
        // A libcamera camera without its plugin cannot come back by waiting: say what to install.
        if case .libcamera = settings.camera.device, let problem = LibcameraAvailability.problem() {
            printError("vigil run: \(path): \(problem)")
            return .unavailable
        }
        var environment = AgentEnvironment.system(encoders: X264EncoderFactory(settings: settings.encoder.x264))
        switch chooseEncoder(settings) {
        case .x264(let reason, let warn):
            environment.encoderChoice = EncoderChoice(
                hardware: nil, required: false, backend: "x264", reason: reason, warn: warn)
        case .hardware(let device, let name, let required, let reason):
            environment.encoderChoice = EncoderChoice(
                hardware: V4L2EncoderFactory(device: device, settings: settings.encoder.hardware), required: required,
                backend: "v4l2", reason: "\(reason): \(device) (\(name))")
        case .configurationError(let problem):
            printError("vigil run: \(path): \(problem)")
            return .config
        }
        // MQTT is an add-on: when it cannot run (a password file not there yet), the agent
        // records without it and says so. Its connection is made in the background.
        if settings.mqtt.enabled {
            let log = Logger(
                level: settings.log.level, sink: environment.logSink,
                metadata: [("camera", .string(settings.camera.name))])
            if let problem = settings.mqtt.problem {
                log.error(
                    "MQTT off: a file it needs cannot be read; recording goes on without it — fix it, then restart",
                    [("problem", .string(problem.description))])
            } else {
                do {
                    environment.sinks.append(
                        try MQTTSink(
                            settings: settings.mqtt, camera: settings.camera.name, log: log, timeZone: SystemTimeZone(),
                            control: environment.control, version: version))
                } catch {
                    log.error(
                        "MQTT off: the client cannot be made; recording goes on without it",
                        [("error", .string(error.description))])
                }
            }
        }
        switch Agent(configPath: path, settings: settings, version: version, environment: environment).run() {
        case .stopped: return .success
        case .sourceCannotOpen: return .noInput
        case .storageCannotBeCreated: return .cannotCreate
        case .storageInUse, .cameraInUse: return .temporaryFailure
        case .sourceFailed: return .dataError
        }
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
