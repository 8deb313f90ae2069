/// A small command-line parser in the shape of swift-argument-parser: one root command,
/// subcommands with typed options, accurate `--help` for each, sysexits exit codes.

/// Exit codes from sysexits.h.
enum ExitCode: Int32 {
    case success = 0
    case failure = 1
    case usage = 64
    case dataError = 65
    case noInput = 66
    case unavailable = 69
    case software = 70
    case osError = 71
    case cannotCreate = 73
    case temporaryFailure = 75
    case ioError = 74
    case config = 78
}

/// A command line that does not fit the command: exit 64 with the message and a pointer to `--help`.
struct UsageError: Error, Equatable {
    var message: String
}

struct OptionSpec {
    /// Long name without the dashes.
    var name: String
    /// The placeholder for the option's value, or nil for a flag.
    var valueName: String?
    var help: String
}

struct ParsedArguments: Equatable {
    var values: [String: String] = [:]
    var flags: Set<String> = []
    var positionals: [String] = []

    func value(_ name: String) -> String? { values[name] }
    func flag(_ name: String) -> Bool { flags.contains(name) }
}

/// Parses `--name value`, `--name=value`, flags and positional arguments; `--` ends options.
/// `-h`/`--help` is always accepted as the flag `help`.
func parseArguments(_ arguments: [String], options: [OptionSpec]) throws(UsageError) -> ParsedArguments {
    var parsed = ParsedArguments()
    var index = 0
    var optionsEnded = false
    while index < arguments.count {
        let argument = arguments[index]
        index += 1
        if optionsEnded || !argument.hasPrefix("-") || argument == "-" {
            parsed.positionals.append(argument)
            continue
        }
        if argument == "--" {
            optionsEnded = true
            continue
        }
        if argument == "-h" || argument == "--help" {
            parsed.flags.insert("help")
            continue
        }
        guard argument.hasPrefix("--") else {
            throw UsageError(message: "unknown option \(argument)")
        }
        var name = String(argument.dropFirst(2))
        var inlineValue: String?
        if let equals = name.firstIndex(of: "=") {
            inlineValue = String(name[name.index(after: equals)...])
            name = String(name[..<equals])
        }
        guard let spec = options.first(where: { $0.name == name }) else {
            throw UsageError(message: "unknown option --\(name)")
        }
        if let valueName = spec.valueName {
            let value: String
            if let inlineValue {
                value = inlineValue
            } else {
                guard index < arguments.count else {
                    throw UsageError(message: "--\(name) needs a value (\(valueName))")
                }
                value = arguments[index]
                index += 1
            }
            guard parsed.values[name] == nil else { throw UsageError(message: "--\(name) is given twice") }
            parsed.values[name] = value
        } else {
            guard inlineValue == nil else { throw UsageError(message: "--\(name) takes no value") }
            parsed.flags.insert(name)
        }
    }
    return parsed
}

/// One subcommand of `vigil`.
protocol Command {
    static var name: String { get }
    /// One line for the command list.
    static var abstract: String { get }
    /// The synopsis after `vigil NAME`.
    static var synopsis: String { get }
    /// What the command does and what it prints, for `--help`.
    static var discussion: String { get }
    static var options: [OptionSpec] { get }
    /// How many arguments other than options it takes (a device, files); none unless it says.
    static var positionalLimit: Int { get }
    /// Checks the arguments and runs; returns the exit code.
    static func run(_ arguments: ParsedArguments) throws(UsageError) -> ExitCode
}

extension Command {
    static var positionalLimit: Int { 0 }

    static var help: String {
        var text = "usage: vigil \(name) \(synopsis)\n\n\(abstract)\n"
        if !discussion.isEmpty { text += "\n\(discussion)\n" }
        let all = options + [OptionSpec(name: "help", valueName: nil, help: "show this help")]
        text += "\noptions:\n"
        for option in all {
            let left = "  --\(option.name)" + (option.valueName.map { " \($0)" } ?? "")
            text += left.padding(to: 24) + option.help + "\n"
        }
        return text
    }
}

extension String {
    func padding(to width: Int) -> String {
        count >= width ? self + "  " : self + String(repeating: " ", count: width - count)
    }
}
