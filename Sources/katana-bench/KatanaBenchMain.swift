// The executable: the bench's commands plus the LTTng provider, which linking `KatanaLTTng` registers before
// `main` — so `--trace-backend default` and `lttng` trace to LTTng-UST exactly as in an app that opts in.
import Foundation
import KatanaBenchCore
import KatanaLTTng

@main
enum KatanaBenchMain {
    static func main() async {
        exit(await KatanaBenchCommand.mainWithExitCodes())
    }
}
