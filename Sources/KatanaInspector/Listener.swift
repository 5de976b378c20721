#if InspectorServer
import Hummingbird
import HTTPTypes
import HummingbirdCore
import NIOCore
import Logging

// The inspector on Hummingbird, behind the package's `InspectorServer` trait (an app on Katana, or on
// KatanaInspector without the trait, builds no server): its routes on a router the app already has, or a listener
// of its own. The request parsing, connection handling and limits are Hummingbird's and SwiftNIO's; what is ours is
// the mapping of ``Inspector/respond(method:path:)``'s answer onto a response, and the safe defaults.
// `make test-inspector` runs both against headless Chromium and hostile clients (Examples/MetricsService).
extension Inspector {
    /// Where the inspector's own listener listens (``serve(on:idleTimeout:onListening:)``).
    public struct Address: Sendable, CustomStringConvertible {
        let bind: BindAddress
        let host: String?
        /// Shown in the `onListening` line: `http://HOST:PORT` or `unix:PATH`.
        public let description: String

        /// 127.0.0.1: reachable from this host only (through a port-forward from elsewhere). Port 0: any free one.
        public static func loopback(port: Int = 0) -> Address { host("127.0.0.1", port: port) }
        /// An address the app names explicitly, e.g. `"0.0.0.0"` — anyone who can reach the host can then read the
        /// page (and the state, when shown): put it behind the app's own access control.
        public static func host(_ host: String, port: Int) -> Address {
            Address(bind: .hostname(host, port: port), host: host, description: "http://\(host):\(port)")
        }
        /// A Unix domain socket at `path`: reachable by whoever the socket file's permissions let in.
        public static func unixSocket(_ path: String) -> Address {
            Address(bind: .unixDomainSocket(path: path), host: nil, description: "unix:\(path)")
        }
    }

    /// A listener that cannot be started as asked, in one line.
    public struct ListenError: Error, CustomStringConvertible {
        /// What is wrong.
        public var description: String
    }

    /// Adds the inspector's routes — the page at ``Configuration/path`` and everything below it — to a Hummingbird
    /// router the app already serves. GET is answered; HEAD gets GET's status and headers; any other method 405.
    public func addRoutes<Context: RequestContext>(to router: Router<Context>) {
        @Sendable func answer(_ request: Request, _ context: Context) -> Hummingbird.Response {
            let head = request.method == .head
            let answer = respond(method: head ? "GET" : request.method.rawValue, path: request.uri.path)
            return Self.hummingbirdResponse(answer, withBody: !head)
        }
        for path in [configuration.path, configuration.path + "/**"] {
            for method in [HTTPRequest.Method.get, .head, .post, .put, .patch, .delete] {
                router.on(RouterPath(path), method: method, use: answer)
            }
        }
    }

    /// Serves the inspector on a listener of its own — for an app that runs no HTTP server, or that keeps the page
    /// off its public one — until the calling task is cancelled (or the listener fails to start: the error says
    /// why). Loopback unless the app gives another ``Address``. A connection idle for `idleTimeout` is closed, so
    /// clients that connect and say nothing do not pile up; live streams are bounded by
    /// ``Configuration/maxStreams`` and ``Configuration/maxStreamDuration``. `onListening` is called with the
    /// address once the listener is up (port 0 resolved to the port taken), e.g. to log it.
    public func serve(on address: Address = .loopback(), idleTimeout: Duration = .seconds(60),
                      onListening: @escaping @Sendable (String) -> Void = { _ in }) async throws {
        guard idleTimeout > .zero else { throw ListenError(description: "idleTimeout \(idleTimeout): give a positive duration") }
        let router = Router()
        addRoutes(to: router)
        var logger = Logger(label: "KatanaInspector")
        logger.logLevel = .warning
        let (seconds, attoseconds) = idleTimeout.components
        let idle = TimeAmount.nanoseconds(seconds >= Int64.max / 1_000_000_000 ? .max : seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        let app = Application(
            router: router,
            server: .http1(configuration: .init(idleTimeout: idle)),
            configuration: .init(address: address.bind, serverName: "KatanaInspector"),
            onServerRunning: { channel in
                if let port = channel.localAddress?.port, let host = address.host {
                    onListening("http://\(host):\(port)\(self.configuration.path)")
                } else {
                    onListening("\(address), path \(self.configuration.path)")
                }
            },
            logger: logger
        )
        try await app.run()
    }

    static func hummingbirdResponse(_ answer: Response, withBody: Bool) -> Hummingbird.Response {
        var headers = HTTPFields()
        for (name, value) in answer.headers {
            if let field = HTTPField.Name(name) { headers[field] = value }
        }
        let body: ResponseBody = switch answer.body {
        case _ where !withBody: ResponseBody()
        case .bytes(let bytes): ResponseBody(byteBuffer: ByteBuffer(bytes: bytes))
        case .stream(let run): ResponseBody { writer in
                await run { bytes in try await writer.write(ByteBuffer(bytes: bytes)) }
                try await writer.finish(nil)
            }
        }
        return Hummingbird.Response(status: HTTPResponse.Status(code: answer.status), headers: headers, body: body)
    }
}
#endif
