import Agent
import Analysis
import Capture
import Configuration
import FoundationEssentials
import Media
import Recorder
import Storage

/// `vigil analyze`: motion detection only, over a source, to see why Vigil would trigger.
enum AnalyzeCommand: Command {
    static let name = "analyze"
    static let abstract = "Run motion detection over a source and show what it finds."
    static let synopsis =
        "--config FILE --source SOURCE [--csv FILE] [--plot FILE.svg] [--mask-image FILE.pgm] [--seconds S]"
    static let discussion = """
        Runs the detector and the event logic of the configuration over SOURCE — "synthetic"
        (two minutes of the demo scene), "file:PATH.y4m", or a camera (a minute of it, or
        --seconds) — as fast as it can, without encoding or recording. Prints one JSON line per event found, in seconds
        of source time, e.g. {"start": 8.03, "end": 12.40, "peak": 0.061}, then a summary line.

        --csv writes one row per frame: time, score, threshold, state and the share of the
        picture the dynamic background auto-masked.
        --plot writes an SVG of the score and the threshold against time, with the events
        shaded, the noise level marked and the auto-masked share below: open it in a browser
        and pick motion.threshold by looking where your real events and your false alarms lie.
        --mask-image writes the last frame at the detector's reduced size as a PGM, with
        the parts the dynamic background auto-masked darkened.

        Record footage for it with: ffmpeg -i INPUT -pix_fmt yuv420p -f yuv4mpegpipe OUT.y4m
        """
    static let options = [
        configOption,
        OptionSpec(name: "source", valueName: "SOURCE", help: "synthetic, file:PATH.y4m, or a device path"),
        OptionSpec(name: "csv", valueName: "FILE", help: "write per-frame scores as CSV"),
        OptionSpec(name: "plot", valueName: "FILE.svg", help: "write a plot of score and threshold"),
        OptionSpec(
            name: "mask-image", valueName: "FILE.pgm",
            help: "write the last frame with the learned auto-mask darkened (PGM, reduced size)"),
        OptionSpec(
            name: "seconds", valueName: "S",
            help:
                "analyse at most S seconds of the source (default: a whole file, 120 s of synthetic, 60 s of a camera)"),
    ]

    static func run(_ arguments: ParsedArguments) throws(UsageError) -> ExitCode {
        guard let sourceText = arguments.value("source") else { throw UsageError(message: "--source is required") }
        guard let (configPath, settings) = loadSettings(arguments) else { return .config }
        var limit: Double?
        if let text = arguments.value("seconds") {
            guard let seconds = Double(text), seconds > 0, seconds.isFinite else {
                throw UsageError(message: "--seconds needs a positive number of seconds")
            }
            limit = seconds
        }
        let source: any FrameSource
        do {
            let specifier = try SourceSpecifier(parsing: sourceText)
            if case .device = specifier { limit = limit ?? 60 }
            source = try SourceOpener.open(
                specifier, width: settings.camera.width, height: settings.camera.height, fps: settings.camera.fps,
                purpose: .analysis
            ).source
        } catch {
            printError("vigil analyze: \(error.description)")
            return .noInput
        }

        var analyzer = MotionAnalyzer(
            settings: settings.motion, eventSettings: EventSettings(settings.recording), mask: settings.motionMask)
        let converter = PlanarConverter(input: source.format)
        var failure: CaptureError?
        var first: Timestamp?
        while true {
            do {
                guard let frame = try source.nextFrame() else { break }
                let origin = first ?? frame.timestamp
                first = origin
                if let limit, (frame.timestamp - origin).seconds >= limit { break }
                analyzer.process(converter.convert(frame).luma, at: frame.timestamp)
            } catch {
                failure = error
                break
            }
        }
        let analysis = analyzer.finish()
        for line in analysis.eventLines { printOut(line) }
        printOut(analysis.summaryLine)
        if let path = arguments.value("csv") {
            guard write(analysis.csv, to: path) else { return .ioError }
        }
        if let path = arguments.value("plot") {
            guard write(analysis.svg(title: "\(sourceText) — \(configPath)"), to: path) else { return .ioError }
        }
        if let path = arguments.value("mask-image") {
            guard let image = analyzer.maskImage() else {
                printError("vigil analyze: no frame was analysed, so there is no mask image to write")
                return .dataError
            }
            do {
                try writeFile(bytes: image, to: path)
            } catch {
                printError("vigil analyze: \(error.description)")
                return .ioError
            }
        }
        if let failure {
            printError("vigil analyze: \(failure.description) (the events above cover the frames before it)")
            return .dataError
        }
        return .success
    }

    private static func write(_ text: String, to path: String) -> Bool {
        do {
            try writeFile(text, to: path)
            return true
        } catch {
            printError("vigil analyze: \(error.description)")
            return false
        }
    }
}
