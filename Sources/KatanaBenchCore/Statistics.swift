import Foundation

/// The Mann–Whitney U test (Wilcoxon rank-sum), one-sided: how likely, if both samples came from the same
/// distribution, a rank sum for `x` at least as large as the one observed is. A small p says `x` tends to be larger
/// than `y`. Rank-based, so it assumes nothing about the shape of run-to-run noise (benchmark figures are skewed and
/// have outliers) and one wild repetition moves it by one rank, not by its size.
enum MannWhitney {
    /// Exact (every way of splitting the pooled ranks) up to this many splits; the normal approximation beyond.
    static let exactLimit = 200_000

    static func pGreater(_ x: [Double], than y: [Double]) -> Double {
        let n = x.count, m = y.count
        guard n > 0, m > 0 else { return 1 }
        let ranks = midranks(x + y)
        let observed = ranks[..<n].reduce(0, +)
        if combinations(n + m, n) <= Double(exactLimit) {
            var atLeast = 0, total = 0
            // Every n-subset of the pooled ranks is equally likely under the null hypothesis.
            func visit(_ start: Int, _ left: Int, _ sum: Double) {
                if left == 0 {
                    total += 1
                    if sum >= observed - 1e-9 { atLeast += 1 }
                    return
                }
                guard start <= ranks.count - left else { return }
                for index in start...(ranks.count - left) { visit(index + 1, left - 1, sum + ranks[index]) }
            }
            visit(0, n, 0)
            return Double(atLeast) / Double(total)
        }
        // Normal approximation with the tie correction and a continuity correction.
        let u = observed - Double(n * (n + 1)) / 2
        let mean = Double(n * m) / 2
        let total = Double(n + m)
        let ties = tieGroups(x + y).reduce(0.0) { $0 + (pow(Double($1), 3) - Double($1)) }
        let variance = Double(n * m) / 12 * ((total + 1) - ties / (total * (total - 1)))
        guard variance > 0 else { return 1 }
        let z = (u - mean - 0.5) / variance.squareRoot()
        return 0.5 * erfc(z / 2.0.squareRoot())
    }

    /// The smallest p the test can give for samples of these sizes (no ties): 1 / C(n + m, n). At or above the
    /// significance level, no difference can be called significant.
    static func smallestP(_ n: Int, _ m: Int) -> Double { 1 / combinations(n + m, n) }

    /// Ranks from 1, ties sharing the mean of the ranks they span.
    static func midranks(_ values: [Double]) -> [Double] {
        let order = values.indices.sorted { values[$0] < values[$1] }
        var ranks = [Double](repeating: 0, count: values.count)
        var start = 0
        while start < order.count {
            var end = start
            while end + 1 < order.count, values[order[end + 1]] == values[order[start]] { end += 1 }
            let rank = Double(start + end) / 2 + 1
            for position in start...end { ranks[order[position]] = rank }
            start = end + 1
        }
        return ranks
    }

    private static func tieGroups(_ values: [Double]) -> [Int] {
        Dictionary(grouping: values, by: { $0 }).values.map(\.count).filter { $0 > 1 }
    }

    static func combinations(_ n: Int, _ k: Int) -> Double {
        guard k >= 0, k <= n else { return 0 }
        var result = 1.0
        for i in 0..<min(k, n - k) { result = result * Double(n - i) / Double(i + 1) }
        return result.rounded()
    }
}
