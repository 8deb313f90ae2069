import Foundation
import Overlay
import Testing

@Suite struct OverlayTextTests {
    /// 2026-12-02 13:45:07 UTC.
    let date = Date(timeIntervalSince1970: 1_796_219_107)

    /// The date's fields in the local time zone, by Foundation's calendar (not the C library).
    func local(_ date: Date) -> DateComponents {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone.current
        return calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
    }

    func twoDigits(_ n: Int?) -> String { String(format: "%02d", n ?? -1) }

    @Test func strftimeFieldsInLocalTime() {
        let c = local(date)
        let expected =
            "\(c.year ?? -1)-\(twoDigits(c.month))-\(twoDigits(c.day)) \(twoDigits(c.hour)):\(twoDigits(c.minute)):\(twoDigits(c.second))"
        #expect(OverlayText(pattern: "%Y-%m-%d %H:%M:%S", camera: "shed").text(at: date) == expected)
        // Within the same second, the same text; the next second, the next text.
        #expect(OverlayText(pattern: "%S", camera: "").text(at: date + 0.999) == twoDigits(c.second))
        #expect(OverlayText(pattern: "%S", camera: "").text(at: date + 1) == twoDigits(((c.second ?? 0) + 1) % 60))
        #expect(OverlayText(pattern: "100%% %y", camera: "").text(at: date) == "100% \(twoDigits((c.year ?? 0) % 100))")
    }

    /// Too long for the picture, the text keeps the time: the camera's name is cut short, then
    /// left out, then only the time is kept.
    @Test func aTextTooLongKeepsTheTime() {
        let c = local(date)
        let time = "\(twoDigits(c.hour)):\(twoDigits(c.minute)):\(twoDigits(c.second))"
        let day = "\(c.year ?? -1)-\(twoDigits(c.month))-\(twoDigits(c.day))"
        let text = OverlayText(pattern: "{camera} %Y-%m-%d %H:%M:%S", camera: "backgarden")
        #expect(text.text(at: date, fitting: 40) == ("backgarden \(day) \(time)", false))
        #expect(text.text(at: date, fitting: 25) == ("backg \(day) \(time)", true))
        #expect(text.text(at: date, fitting: 19) == ("\(day) \(time)", true))
        #expect(text.text(at: date, fitting: 12) == (time, true))
        #expect(text.text(at: date, fitting: 5) == (String(time.prefix(5)), true))
        let twice = OverlayText(pattern: "{camera} %H:%M:%S {camera}", camera: "abcdef")
        #expect(twice.text(at: date, fitting: 18) == ("abcd \(time) abcd", true))
        let timeFirst = OverlayText(pattern: "%H:%M:%S", camera: "")
        #expect(timeFirst.text(at: date, fitting: 4) == (String(time.prefix(4)), true))
    }

    @Test func cameraNameIsSubstitutedAsItIs() {
        let c = local(date)
        #expect(OverlayText(pattern: "{camera} %Y", camera: "shed").text(at: date) == "shed \(c.year ?? -1)")
        #expect(OverlayText(pattern: "{camera}/{camera}", camera: "door").text(at: date) == "door/door")
        // strftime does not see the name: its % stay.
        #expect(OverlayText(pattern: "%Y {camera}", camera: "50%Y %% %").text(at: date) == "\(c.year ?? -1) 50%Y %% %")
        #expect(OverlayText(pattern: "{camera}", camera: "Gartenhäuschen ✓").text(at: date) == "Gartenhäuschen ✓")
        #expect(OverlayText(pattern: "no fields", camera: "x").text(at: date) == "no fields")
        #expect(OverlayText(pattern: "", camera: "x").text(at: date) == "")
    }

    /// The text is bounded however long the pattern, the name or a field width.
    @Test func lengthIsBounded() {
        let long = OverlayText(pattern: String(repeating: "ab", count: 5000), camera: "").text(at: date)
        #expect(long.unicodeScalars.count == OverlayText.maximumLength)
        #expect(long.hasPrefix("abab"))
        let name = OverlayText(pattern: "{camera}", camera: String(repeating: "%", count: 3000)).text(at: date)
        #expect(name == String(repeating: "%", count: OverlayText.maximumLength))
        // A field padded past the 4 KiB the expansion may take gives no text, not a long one.
        #expect(OverlayText(pattern: "%9000Y", camera: "").text(at: date) == "")
        // A NUL does not end the pattern.
        #expect(OverlayText(pattern: "a\u{0}b", camera: "").text(at: date) == "ab")
    }
}
