import POSIX
import Storage

/// The `vigil` command: the agent and its subcommands.
let version = "0.1.0"

let commands: [any Command.Type] = [
    RunCommand.self, CheckCommand.self, AnalyzeCommand.self, ClipsCommand.self, RepairCommand.self, ProbeCommand.self,
    TriggerCommand.self, PasswdCommand.self,
]

func printOut(_ text: String) {
    // A closed or broken stdout (`vigil clips | head`) must not crash the command.
    writeAll(text + "\n", to: 1)
}

func printError(_ text: String) {
    writeAll(text + "\n", to: 2)
}

let rootHelp: String = {
    var text = """
        usage: vigil COMMAND [OPTIONS]

        Vigil records motion from a camera into crash-safe QuickTime clips, starting a few
        seconds before the motion.

        commands:

        """
    for command in commands { text += "  " + command.name.padding(to: 10) + command.abstract + "\n" }
    text += "\nRun `vigil COMMAND --help` for a command's options.\n"
    return text
}()

@MainActor func main() -> ExitCode {
    var arguments = Array(CommandLine.arguments.dropFirst())
    guard let first = arguments.first else {
        printError(rootHelp)
        return .usage
    }
    switch first {
    case "-h", "--help", "help":
        if first == "help", arguments.count > 1, let command = commands.first(where: { $0.name == arguments[1] }) {
            printOut(command.help)
        } else {
            printOut(rootHelp)
        }
        return .success
    case "--version":
        printOut("vigil \(version)")
        return .success
    default:
        break
    }
    arguments.removeFirst()
    guard let command = commands.first(where: { $0.name == first }) else {
        printError("vigil: unknown command '\(first)' — run `vigil --help` for the list")
        return .usage
    }
    do throws(UsageError) {
        let parsed = try parseArguments(arguments, options: command.options)
        if parsed.flag("help") {
            printOut(command.help)
            return .success
        }
        if parsed.positionals.count > command.positionalLimit {
            throw UsageError(message: "unexpected argument \(parsed.positionals[command.positionalLimit])")
        }
        return try command.run(parsed)
    } catch {
        printError("vigil \(command.name): \(error.message) — run `vigil \(command.name) --help` for usage")
        return .usage
    }
}

ProcessID.exit(main().rawValue)
