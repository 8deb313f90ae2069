internal import CGnuTLS
import Media
internal import POSIX

/// When a certificate is valid: from `notBefore` to `notAfter`, seconds since 1970 (UTC), as
/// GnuTLS reads them from the first certificate of a PEM file (the server's own; its chain
/// follows it).
struct CertificateDates: Equatable, Sendable {
    var notBefore: Int
    var notAfter: Int

    /// The dates of the first certificate in `pem`; nil when GnuTLS reads no certificate there.
    static func read(_ pem: String) -> CertificateDates? {
        var certificate: gnutls_x509_crt_t?
        guard gnutls_x509_crt_init(&certificate) >= 0, let certificate else { return nil }
        defer { gnutls_x509_crt_deinit(certificate) }
        var bytes = Array(pem.utf8)
        let imported = bytes.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var datum = gnutls_datum_t(data: buffer.baseAddress, size: UInt32(buffer.count))
            return gnutls_x509_crt_import(certificate, &datum, GNUTLS_X509_FMT_PEM)
        }
        guard imported >= 0 else { return nil }
        let notBefore = gnutls_x509_crt_get_activation_time(certificate)
        let notAfter = gnutls_x509_crt_get_expiration_time(certificate)
        guard notBefore != -1, notAfter != -1 else { return nil }
        return CertificateDates(notBefore: Int(notBefore), notAfter: Int(notAfter))
    }

    /// `seconds` since 1970 as a person reads a date: `2026-12-04 18:30:00 UTC`.
    static func text(_ seconds: Int) -> String {
        let t = CalendarTime.utc(secondsSince1970: Double(seconds))
        let two = { (n: Int) in DecimalText.zeroPadded(n, 2) }
        return "\(t.year)-\(two(t.month))-\(two(t.day)) \(two(t.hour)):\(two(t.minute)):\(two(t.second)) UTC"
    }
}

extension Settings.Web {
    /// How long before its end a certificate is said to end soon: two weeks.
    public static let certificateNotice = 14 * 86400

    /// Where a certificate's dates stand at a moment.
    public enum CertificateTiming: Equatable, Sendable {
        case valid
        case notYetValid
        case expired
        /// It ends within `certificateNotice`: in so many whole days.
        case endsSoon(days: Int)
    }

    /// Where a certificate valid from `notBefore` to `notAfter` stands at `now` (seconds since
    /// 1970).
    public static func certificateTiming(notBefore: Int, notAfter: Int, now: Int) -> CertificateTiming {
        if now < notBefore { return .notYetValid }
        if now > notAfter { return .expired }
        if notAfter - now < certificateNotice { return .endsSoon(days: (notAfter - now) / 86400) }
        return .valid
    }

    /// What to say of the certificate at `path` with `dates` at `now`; nil when it is valid.
    static func certificateWarning(_ dates: CertificateDates, path: String, now: Int) -> String? {
        let key = "web.tls_cert_file"
        let served = "it is served meanwhile (it still encrypts), and browsers warn before every visit"
        switch certificateTiming(notBefore: dates.notBefore, notAfter: dates.notAfter, now: now) {
        case .valid:
            return nil
        case .expired:
            return
                "\(key): \(path) expired on \(CertificateDates.text(dates.notAfter)) — renew it (a new certificate for the same key will do), then restart the agent; \(served), and clients that check it (curl, ffmpeg, Home Assistant) refuse it"
        case .notYetValid:
            return
                "\(key): \(path) is not valid before \(CertificateDates.text(dates.notBefore)) — is this machine's clock right (timedatectl; a board without a battery may start in the past)? If it is, the certificate was made for later; \(served)"
        case .endsSoon(let days):
            return
                "\(key): \(path) expires on \(CertificateDates.text(dates.notAfter)), in \(days) day(s) — renew it before then, then restart the agent"
        }
    }

    /// `seconds` since 1970 as the certificate's messages write a date:
    /// `2026-12-04 18:30:00 UTC`.
    public static func dateText(_ seconds: Int) -> String { CertificateDates.text(seconds) }

    /// `url`'s host, in lower case (an IPv6 address in its brackets); nil without `url`.
    public var urlHost: String? {
        guard let url, let scheme = url.firstRange(of: "://") else { return nil }
        var authority = url[scheme.upperBound...].prefix { $0 != "/" }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            return String(authority[...close]).lowercased()
        }
        let host = authority.prefix { $0 != ":" }
        return host.isEmpty ? nil : host.lowercased()
    }
}
