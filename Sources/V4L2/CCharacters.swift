/// A C character array (a fixed-size tuple such as `v4l2_capability.card`) as a String,
/// up to its first NUL.
package func string<Tuple>(fromCharacters tuple: Tuple) -> String {
    withUnsafeBytes(of: tuple) { bytes in
        String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
    }
}
