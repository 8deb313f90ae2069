import Agent
import H264

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
        cannot be opened; 73 when the storage directory cannot be created; 75 when another
        agent records into it; 65 when a file source turns out to be malformed part-way (the
        clips before are kept); 71 when the system refuses the agent a thread. A storage
        directory that is not there yet (a disk not mounted) or not writable is waited for.
        """
    static let options = [configOption]

    static func run(_ arguments: ParsedArguments) throws(UsageError) -> ExitCode {
        guard arguments.positionals.isEmpty else {
            throw UsageError(message: "unexpected argument \(arguments.positionals[0])")
        }
        guard let (path, settings) = loadSettings(arguments) else { return .config }
        let environment = AgentEnvironment.system(encoders: X264EncoderFactory(settings: settings.encoder.x264))
        switch Agent(configPath: path, settings: settings, version: version, environment: environment).run() {
        case .stopped: return .success
        case .sourceCannotOpen: return .noInput
        case .storageCannotBeCreated: return .cannotCreate
        case .storageInUse: return .temporaryFailure
        case .sourceFailed: return .dataError
        }
    }
}
