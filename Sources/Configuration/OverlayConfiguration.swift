import FoundationEssentials
import Overlay

extension Settings {
    /// The `overlay` section: text drawn into the picture that is recorded.
    public struct Overlay: Equatable, Sendable {
        /// A strftime pattern with `{camera}`; empty for none.
        public var text: String
        public var position: OverlayPosition
        /// Font pixels per picture pixel; 0 for one per 360 lines of picture (`scale(forHeight:)`).
        public var scale: Int
        /// The console font (`BitmapFont.defaultPath`), read once, when the settings were loaded;
        /// nil when nothing is drawn.
        public var font: BitmapFont?

        /// Whether anything is drawn.
        public var enabled: Bool { !text.isEmpty }

        /// The scale for a picture `height` lines high: `scale`, or 1 per 360 lines (2 at 720p).
        public func scale(forHeight height: Int) -> Int {
            scale > 0 ? scale : min(TextOverlay.scales.upperBound, max(1, height / 360))
        }
    }

    static func overlay(_ v: ConfigValues) throws(ConfigurationError) -> Overlay {
        let text = v.text("overlay.text")
        if text.utf8.count > OverlayText.maximumPatternLength {
            throw v.error(
                "overlay.text",
                "overlay.text is \(text.utf8.count) bytes long — keep it under \(OverlayText.maximumPatternLength) (one line of text)"
            )
        }
        if text.contains(where: { $0.isNewline }) {
            throw v.error("overlay.text", "overlay.text holds a line break — the overlay is one line of text")
        }
        var overlay = Overlay(
            text: text, position: try choice("overlay.position", v), scale: v.integer("overlay.scale"), font: nil)
        // The font is read once, here, so a missing package is a configuration error, not a
        // surprise at the first frame; the pipeline draws with this copy.
        if overlay.enabled {
            do { overlay.font = try BitmapFont.load(path: BitmapFont.defaultPath) } catch {
                throw v.error("overlay.text", "overlay.text needs a console font: \(error.description)")
            }
        }
        return overlay
    }
}
