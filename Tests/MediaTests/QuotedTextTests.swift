import Media
import Testing

/// The one way a quoted string is read (HTTP Digest's parameters, a logfmt value) and the one
/// escaping loop (logfmt, markup).
@Suite struct QuotedTextTests {
    @Test func aQuotedStringEndsAtItsClosingQuoteAndKeepsWhatIsEscaped() {
        let read = #"" \"quoted\" \\ end", next=1"#[...].quotedString()
        #expect(read?.value == #" "quoted" \ end"#)
        #expect(read?.rest == ", next=1")
        #expect(#""never closed"#[...].quotedString() == nil)
        #expect("bare"[...].quotedString() == nil)
        #expect(#""""#[...].quotedString()?.value == "")
    }

    @Test func markupAndControlCharactersAreReplacedTheRestKept() {
        #expect(MarkupText.escaped("a<b> & \"c\" 'd'\u{1}\té") == "a&lt;b&gt; &amp; &quot;c&quot; &apos;d&apos;?\té")
        #expect("x1y2".replacingScalars { $0.properties.numericType != nil ? "#" : nil } == "x#y#")
    }
}
