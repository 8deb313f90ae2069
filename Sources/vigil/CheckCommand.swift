import Capture
import Configuration

/// The configuration file used when `--config` is not given.
let defaultConfigPath = "/etc/vigil/vigil.conf"

let configOption = OptionSpec(
    name: "config", valueName: "FILE", help: "the configuration file (default \(defaultConfigPath))")

/// The configuration `--config` names (or the default), loaded and checked; nil after
/// printing `file:line: message` when it is invalid (the caller exits 78). An
/// `onvif.password_file` that cannot be used is invalid too, unless `onvifFileMayBeBad`
/// (`vigil passwd`, which makes it).
func loadSettings(
    _ arguments: ParsedArguments, onvifFileMayBeBad: Bool = false
) -> (path: String, settings: Settings)? {
    let path = arguments.value("config") ?? defaultConfigPath
    do {
        let settings = try Settings.load(path: path)
        if !onvifFileMayBeBad, let problem = settings.onvif.problem {
            printError(problem.description)
            return nil
        }
        return (path, settings)
    } catch {
        printError(error.description)
        return nil
    }
}

/// `vigil check [--config FILE]`: validates a configuration, like `nginx -t`.
enum CheckCommand: Command {
    static let name = "check"
    static let abstract = "Check a configuration file and print the settings in effect."
    static let synopsis = "[--config FILE]"
    static let discussion = """
        Reads the configuration as `vigil run` would and prints every setting in effect, in
        the file's own syntax, marking the ones left at their default. Nothing is opened or
        started. A problem is reported as FILE:LINE: what is wrong, with exit status 78; so
        is a file that sets nothing (empty, or only comments), taken for one cut short. Files
        an add-on needs are read as the agent would read them: one that cannot be used (the web
        server's password file or key readable by others, say) is a warning, as is a web
        certificate that has expired, is not valid yet or ends within 14 days.
        """
    static let options = [configOption]

    static func run(_ arguments: ParsedArguments) throws(UsageError) -> ExitCode {
        guard let (path, settings) = loadSettings(arguments) else { return .config }
        if let warning = settings.mqtt.checkWarning { printError(warning) }
        if let warning = settings.web.checkWarning { printError(warning) }
        if let warning = settings.rtsp.checkWarning { printError(warning) }
        for warning in settings.onvif.checkWarnings(web: settings.web) { printError(warning) }
        if settings.web.enabled, let warning = settings.web.certificateWarning { printError(warning.warning()) }
        if let warning = settings.upload.checkWarning { printError(warning) }
        if case .libcamera = settings.camera.device, let problem = LibcameraAvailability.problem() {
            printError("warning: \(problem); vigil run exits 69 until then")
        }
        printOut("# \(path): configuration OK\n" + settings.values.effectiveText)
        return .success
    }
}
