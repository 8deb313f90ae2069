import Testing

/// The error `body` throws, when it is an `E`, to look into; an issue is recorded (at the
/// caller) when it throws nothing or another error. What `#expect(throws:)` returns from Swift
/// Testing 6.1 on; Debian trixie's Swift 6.0 returns nothing from it, so tests use this.
public func expectError<E: Error, Result>(
    _ type: E.Type, _ comment: String = "", sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Result
) -> E? {
    do {
        _ = try body()
        Issue.record("\(comment) expected \(E.self) to be thrown, but nothing was", sourceLocation: sourceLocation)
    } catch let error as E {
        return error
    } catch {
        Issue.record("\(comment) expected \(E.self) to be thrown, but \(error) was", sourceLocation: sourceLocation)
    }
    return nil
}
