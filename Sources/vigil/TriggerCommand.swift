import Agent

/// `vigil trigger [--seconds N] [--config FILE]`: records an outside event on the running agent.
enum TriggerCommand: Command {
    static let name = "trigger"
    static let abstract = "Make the running agent record now, as an outside event."
    static let synopsis = "[--seconds N] [--config FILE]"
    static let discussion = """
        Asks the agent running with this configuration (found by its camera.name) to record
        now, for N seconds (10 unless given, 1 to 3600) and then the post-roll, with the
        pre-roll before: for a PIR sensor, a doorbell or a script. The events journal marks
        the clip "trigger": "external". The request goes through a Unix socket,
        /run/vigil/CAMERA.sock (or $VIGIL_RUNTIME_DIR/CAMERA.sock); root and members of the
        agent's group may use it. A directory under /tmp (the fallback when there is no
        /run/vigil or $XDG_RUNTIME_DIR) is used only while it is this user's with mode 0700.

        Exit 0 when the agent took the request; 69 when no agent answers, or it cannot record
        now (its camera delivers no frames: the message says since when; or too many requests
        at once); 65 when it refused the request itself.
        """
    static let options = [
        configOption,
        OptionSpec(name: "seconds", valueName: "N", help: "how long to record (1 to 3600; 10 unless given)"),
    ]

    static func run(_ arguments: ParsedArguments) throws(UsageError) -> ExitCode {
        var seconds: Double?
        if let text = arguments.value("seconds") {
            guard case .success(let value) = OutsideRequest.seconds(Substring(text)) else {
                throw UsageError(message: "--seconds \(text): give \(OutsideRequest.accepted)")
            }
            seconds = value
        }
        guard let (_, settings) = loadSettings(arguments) else { return .config }
        do {
            let reply = try TriggerSocket.request(
                camera: settings.camera.name, seconds: seconds, directories: TriggerSocket.directories())
            if reply.hasPrefix("unavailable:") {
                printError(
                    "vigil trigger: camera \(settings.camera.name): \(reply.dropFirst("unavailable:".count + 1))")
                return .unavailable
            }
            guard reply.hasPrefix("ok") else {
                printError("vigil trigger: the agent refused: \(reply)")
                return .dataError
            }
            printOut("vigil trigger: camera \(settings.camera.name): \(reply)")
            return .success
        } catch {
            printError("vigil trigger: \(error.description)")
            return .unavailable
        }
    }
}
