import Overlay

/// Reads back the text a `TextOverlay` drew, from a picture's luma (a decoded frame, or the
/// frame itself): an independent check that the characters are there and legible.
///
/// The picture is the one shown: for an overlay with a rotation, the frame turned clockwise by
/// it, as a player turns it (or as ffmpeg decodes a movie whose matrix says so), since that is
/// where the text is upright.
///
/// The text is taken to be `length` characters of `font` at `scale` in `position`, laid out as
/// `TextBox` says (unturned, in the `width` × `height` picture given). Each character cell is compared with the glyph of every character of
/// `alphabet`, font pixel by font pixel (the mean of its `scale`×`scale` pixels): where the
/// candidate's glyph is drawn the picture must be bright (≥ 162, two thirds of the way from the
/// outline's 16 to the glyph's 235), where its own outline is, dark (≤ 89); a miss costs 4.
/// Other pixels (the picture behind, or a neighbour's outline) cost 1 whatever they hold, so
/// a candidate is not favoured for claiming fewer pixels. The cheapest candidate wins; a cell
/// whose best candidate misses more than an eighth of its pixels reads as `?`, as does a cell
/// outside the picture.
public func readText(
    luma: [UInt8], width: Int, height: Int, font: BitmapFont, position: OverlayPosition, scale: Int, length: Int,
    alphabet: String
) -> String {
    guard width > 0, height > 0, luma.count >= width * height, scale > 0 else { return "" }
    let box = TextBox(
        characters: length, font: font, scale: scale, position: position, pictureWidth: width, pictureHeight: height)
    let templates = alphabet.unicodeScalars.map { GlyphTemplate(font.glyph(for: $0), character: Character($0)) }
    let cellPixels = font.width * font.height
    var text = ""
    for i in 0..<length {
        // The mean luma of each font pixel of the cell; nil where it leaves the picture.
        var samples: [Int?] = []
        samples.reserveCapacity(cellPixels)
        for gy in 0..<font.height {
            for gx in 0..<font.width {
                let x = box.textX + i * box.cellWidth + gx * scale
                let y = box.textY + gy * scale
                guard x >= 0, y >= 0, x + scale <= width, y + scale <= height else {
                    samples.append(nil)
                    continue
                }
                var sum = 0
                for dy in 0..<scale {
                    for dx in 0..<scale { sum += Int(luma[(y + dy) * width + x + dx]) }
                }
                samples.append(sum / (scale * scale))
            }
        }
        guard samples.allSatisfy({ $0 != nil }) else {
            text.append("?")
            continue
        }
        var best: (cost: Int, misses: Int, character: Character)?
        for template in templates {
            var cost = 0
            var misses = 0
            for (p, sample) in samples.enumerated() {
                let v = sample ?? 0
                switch template.kinds[p] {
                case .glyph where v < 162, .outline where v > 89:
                    cost += 4
                    misses += 1
                case .glyph, .outline: break
                case .other: cost += 1
                }
            }
            if best.map({ cost < $0.cost }) ?? true { best = (cost, misses, template.character) }
        }
        if let best, best.misses * 8 <= cellPixels {
            text.append(best.character)
        } else {
            text.append("?")
        }
    }
    return text
}

/// What each pixel of a character cell holds when a glyph is drawn there alone.
private struct GlyphTemplate {
    enum Kind { case glyph, outline, other }
    let character: Character
    let kinds: [Kind]

    init(_ glyph: Glyph, character: Character) {
        self.character = character
        var kinds: [Kind] = []
        for y in 0..<glyph.height {
            for x in 0..<glyph.width {
                if glyph.isSet(x: x, y: y) {
                    kinds.append(.glyph)
                    continue
                }
                let near = (-1...1).contains { dy in (-1...1).contains { dx in glyph.isSet(x: x + dx, y: y + dy) } }
                kinds.append(near ? .outline : .other)
            }
        }
        self.kinds = kinds
    }
}
