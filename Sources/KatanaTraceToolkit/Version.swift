/// The version of this package's tools, as `katana-trace --version` and `katana-bench --version` print it (and the
/// standalone binary `make dist` builds).
public enum KatanaRelease {
    public static let version = "0.6.0"
}
