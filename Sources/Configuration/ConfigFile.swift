internal import CLibconfig
import FoundationEssentials

/// A configuration problem, located in the file: printed as `file:line: message`.
public struct ConfigurationError: Error, CustomStringConvertible, Sendable, Equatable {
    public var file: String
    /// 1-based line of the offending setting, or nil when the problem is not on one line.
    public var line: Int?
    public var message: String

    public init(file: String, line: Int?, message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    public var description: String {
        if let line { return "\(file):\(line): \(message)" }
        return "\(file): \(message)"
    }

    /// The problem as `vigil check` warns of it: `FILE:LINE: warning: MESSAGE`, and `consequence`
    /// after it when given.
    public func warning(_ consequence: String? = nil) -> String {
        let said = "warning: " + message + (consequence.map { " (\($0))" } ?? "")
        return line.map { "\(file):\($0): \(said)" } ?? "\(file): \(said)"
    }
}

/// The settings a configuration file gives, checked against the schema: every name known,
/// every value of the right type and in range. Settings the file leaves out take their defaults.
public struct ConfigValues: Sendable, Equatable {
    /// The file the values came from (for messages).
    public let file: String
    private var values: [String: ConfigValue]
    private var lines: [String: Int]
    /// The groups (sections) the file has, empty ones included.
    public private(set) var groups: Set<String> = []

    /// Only the defaults.
    public init(defaultsFor file: String) {
        self.file = file
        self.values = [:]
        self.lines = [:]
    }

    /// What a file that sets nothing is told: it is taken for one cut short, not for every default.
    static let setsNothing =
        "the file sets nothing (it is empty, or holds only comments) — a file cut short is not taken for every default: write its settings back (vigil.conf(5) lists them; at least camera and storage)"

    /// Reads and checks the configuration file at `path`.
    public static func load(path: String) throws(ConfigurationError) -> ConfigValues {
        guard FileManager.default.fileExists(atPath: path) else {
            throw ConfigurationError(
                file: path, line: nil,
                message:
                    "no such file — give the right path with --config, or copy the documented default from /etc/vigil/vigil.conf"
            )
        }
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw ConfigurationError(file: path, line: nil, message: "permission denied — can this user read it?")
        }
        let values = try read(path: path, text: nil) { config in config_read_file(config, path) }
        // An empty file would run on every default: keep clips 30 days, record the synthetic
        // scene into /var/lib/vigil/clips. A save cut short leaves one; nobody means it.
        guard !values.groups.isEmpty else { throw ConfigurationError(file: path, line: nil, message: setsNothing) }
        return values
    }

    /// Reads and checks configuration text; `name` stands for the file in messages.
    public static func parse(_ text: String, name: String) throws(ConfigurationError) -> ConfigValues {
        try read(path: name, text: text) { config in config_read_string(config, text) }
    }

    private static func read(
        path: String, text: String?, _ reader: (UnsafeMutablePointer<config_t>) -> Int32
    ) throws(ConfigurationError) -> ConfigValues {
        let config = UnsafeMutablePointer<config_t>.allocate(capacity: 1)
        config_init(config)
        defer {
            config_destroy(config)
            config.deallocate()
        }
        if reader(config) != CONFIG_TRUE {
            let file = CLibconfig_error_file(config).map { String(cString: $0) } ?? path
            let problem = CLibconfig_error_text(config).map { String(cString: $0) } ?? "unreadable"
            let line = Int(CLibconfig_error_line(config))
            if CLibconfig_error_type(config) == Int32(CONFIG_ERR_FILE_IO.rawValue) {
                throw ConfigurationError(file: file, line: nil, message: "cannot read it (\(problem.lowercased()))")
            }
            // A string or group left open runs to the end of the file, which is where libconfig
            // notices: point at where it opened instead.
            let source =
                file == path
                ? (text ?? (try? String(contentsOfFile: path, encoding: .utf8)))
                : try? String(contentsOfFile: file, encoding: .utf8)
            if let source, let open = unclosedConstruct(in: source), line >= (open.onlyAtEnd ? open.endLine : open.line)
            {
                throw ConfigurationError(file: file, line: open.line, message: "syntax error — \(open.problem)")
            }
            throw ConfigurationError(
                file: file, line: line > 0 ? line : nil,
                message:
                    "\(problem) — check the syntax near this line (settings look like `name = value;`, inside `section = { ... };`)"
            )
        }
        var result = ConfigValues(defaultsFor: path)
        guard let root = CLibconfig_root_setting(config) else { return result }
        for i in 0..<config_setting_length(root) {
            guard let section = config_setting_get_elem(root, UInt32(i)) else { continue }
            let sectionName = CLibconfig_setting_name(section).map { String(cString: $0) } ?? "?"
            let sectionLine = Int(CLibconfig_setting_source_line(section))
            let file = CLibconfig_setting_source_file(section).map { String(cString: $0) } ?? path
            guard ConfigSchema.sections.contains(sectionName) else {
                var message = "unknown section '\(sectionName)'"
                if let hint = ConfigSchema.sections.min(by: {
                    editDistance($0, sectionName) < editDistance($1, sectionName)
                }),
                    editDistance(hint, sectionName) <= 2
                {
                    message += " — did you mean '\(hint)'?"
                } else {
                    message += " — the sections are " + ConfigSchema.sections.joined(separator: ", ")
                }
                throw ConfigurationError(file: file, line: sectionLine, message: message)
            }
            guard CLibconfig_setting_type(section) == CONFIG_TYPE_GROUP else {
                throw ConfigurationError(
                    file: file, line: sectionLine,
                    message: "'\(sectionName)' must be a group: \(sectionName) = { ... };")
            }
            result.groups.insert(sectionName)
            for j in 0..<config_setting_length(section) {
                guard let setting = config_setting_get_elem(section, UInt32(j)) else { continue }
                let name = sectionName + "." + (CLibconfig_setting_name(setting).map { String(cString: $0) } ?? "?")
                let line = Int(CLibconfig_setting_source_line(setting))
                let settingFile = CLibconfig_setting_source_file(setting).map { String(cString: $0) } ?? file
                let value = try check(setting, name: name, file: settingFile, line: line)
                result.values[name] = value
                result.lines[name] = line
            }
        }
        return result
    }

    private static func check(
        _ setting: UnsafeMutablePointer<config_setting_t>, name: String, file: String, line: Int
    ) throws(ConfigurationError) -> ConfigValue {
        func fail(_ message: String) -> ConfigurationError {
            ConfigurationError(file: file, line: line, message: message)
        }
        guard let key = ConfigSchema.key(name) else {
            var message = "unknown setting '\(name)'"
            if let hint = ConfigSchema.suggestion(for: name) {
                message += " — did you mean '\(hint)'?"
            } else {
                message += " — see /etc/vigil/vigil.conf for the settings there are"
            }
            throw fail(message)
        }
        let type = CLibconfig_setting_type(setting)
        let isInteger = type == CONFIG_TYPE_INT || type == CONFIG_TYPE_INT64
        switch key.kind {
        case .integer(let range):
            guard isInteger else { throw fail("\(name) must be \(key.accepted), not \(describe(type))") }
            let v = config_setting_get_int64(setting)
            guard v >= Int64(range.lowerBound), v <= Int64(range.upperBound) else {
                throw fail("\(name) = \(v) is out of range — use \(key.accepted)")
            }
            return .integer(Int(v))
        case .number(let range):
            guard isInteger || type == CONFIG_TYPE_FLOAT else {
                throw fail("\(name) must be \(key.accepted), not \(describe(type))")
            }
            let v = isInteger ? Double(config_setting_get_int64(setting)) : config_setting_get_float(setting)
            guard v.isFinite, range.contains(v) else {
                throw fail("\(name) = \(formatNumber(v)) is out of range — use \(key.accepted)")
            }
            return .number(v)
        case .boolean:
            guard type == CONFIG_TYPE_BOOL else { throw fail("\(name) must be true or false, not \(describe(type))") }
            return .boolean(config_setting_get_bool(setting) != 0)
        case .text:
            guard type == CONFIG_TYPE_STRING, let s = config_setting_get_string(setting) else {
                throw fail("\(name) must be a string in double quotes, not \(describe(type))")
            }
            return .text(String(cString: s))
        case .choice(let options):
            guard type == CONFIG_TYPE_STRING, let s = config_setting_get_string(setting) else {
                throw fail("\(name) must be \(key.accepted), not \(describe(type))")
            }
            let v = String(cString: s)
            guard options.contains(v) else { throw fail("\(name) = \"\(v)\" is not allowed — use \(key.accepted)") }
            return .text(v)
        }
    }

    private static func describe(_ type: Int32) -> String {
        switch type {
        case CONFIG_TYPE_GROUP: "a group"
        case CONFIG_TYPE_INT, CONFIG_TYPE_INT64: "a whole number"
        case CONFIG_TYPE_FLOAT: "a number with a decimal point"
        case CONFIG_TYPE_STRING: "a string"
        case CONFIG_TYPE_BOOL: "true/false"
        case CONFIG_TYPE_ARRAY: "an array"
        case CONFIG_TYPE_LIST: "a list"
        default: "this"
        }
    }

    // MARK: Access

    /// The value of `name`: the file's, or the default.
    public func value(_ name: String) -> ConfigValue {
        if let v = values[name] { return v }
        guard let key = ConfigSchema.key(name) else { preconditionFailure("\(name) is not in the schema") }
        return key.defaultValue
    }

    /// True when the file sets `name` itself.
    public func isSet(_ name: String) -> Bool { values[name] != nil }

    /// The line `name` is set on, if the file sets it.
    public func line(_ name: String) -> Int? { lines[name] }

    public func integer(_ name: String) -> Int {
        if case .integer(let v) = value(name) { return v }
        preconditionFailure("\(name) is not an integer setting")
    }

    public func number(_ name: String) -> Double {
        switch value(name) {
        case .number(let v): return v
        case .integer(let v): return Double(v)
        default: preconditionFailure("\(name) is not a number setting")
        }
    }

    public func boolean(_ name: String) -> Bool {
        if case .boolean(let v) = value(name) { return v }
        preconditionFailure("\(name) is not a boolean setting")
    }

    public func text(_ name: String) -> String {
        if case .text(let v) = value(name) { return v }
        preconditionFailure("\(name) is not a string setting")
    }

    /// An error about `name`, located at its line (or the file when it is a default).
    public func error(_ name: String, _ message: String) -> ConfigurationError {
        ConfigurationError(file: file, line: line(name), message: message)
    }

    /// The effective settings in libconfig syntax, grouped by section, defaults marked.
    public var effectiveText: String {
        var text = ""
        for section in ConfigSchema.sections {
            text += "\(section) = {\n"
            for key in ConfigSchema.keys where key.section == section {
                let setting = key.name.dropFirst(section.count + 1)
                text += "  \(setting) = \(value(key.name));" + (isSet(key.name) ? "" : "  # default") + "\n"
            }
            text += "};\n"
        }
        return text
    }
}

/// What most likely broke libconfig text whose parse failed: a string that runs over the end
/// of its line (its closing quote is missing; libconfig strings may span lines, so it swallows
/// text up to the next quote), or a string, group, array or list still open at the end. The
/// line it starts on, the text's last line, whether it only explains an error at the end, and
/// what to fix. Nil when nothing is left open.
func unclosedConstruct(in text: String) -> (line: Int, endLine: Int, onlyAtEnd: Bool, problem: String)? {
    enum Mode { case normal, string, lineComment, blockComment }
    var mode = Mode.normal
    var line = 1
    var stringLine = 0
    var firstMultilineString: Int?
    var open: [(Character, Int)] = []
    var previous: Character = " "
    var escaped = false
    for c in text {
        switch mode {
        case .normal:
            if c == "\"" {
                mode = .string
                stringLine = line
                escaped = false
            } else if c == "#" || (c == "/" && previous == "/") {
                mode = .lineComment
            } else if c == "*" && previous == "/" {
                mode = .blockComment
            } else if "{[(".contains(c) {
                open.append((c, line))
            } else if "}])".contains(c), !open.isEmpty {
                open.removeLast()
            }
        case .string:
            if escaped {
                escaped = false
            } else if c == "\\" {
                escaped = true
            } else if c == "\"" {
                mode = .normal
            } else if c == "\n", firstMultilineString == nil {
                firstMultilineString = stringLine
            }
        case .lineComment:
            if c == "\n" { mode = .normal }
        case .blockComment:
            if c == "/" && previous == "*" { mode = .normal }
        }
        if c == "\n" { line += 1 }
        // A "/" that closed a block comment must not start another comment.
        previous = mode == .normal && c == "/" && previous == "*" ? " " : c
    }
    let endLine = text.hasSuffix("\n") ? line - 1 : line
    if let first = firstMultilineString {
        return (
            first, endLine, false,
            "the string that starts on this line runs past the end of the line: add its closing \""
        )
    }
    if mode == .string {
        return (stringLine, endLine, true, "the string that starts on this line is never closed: add its closing \"")
    }
    if let (c, openedOn) = open.last {
        let closer: String = c == "{" ? "}" : (c == "[" ? "]" : ")")
        return (openedOn, endLine, true, "the \(c) on this line is never closed: add the matching \(closer)")
    }
    return nil
}
