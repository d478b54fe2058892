package temporaljoins;

/**
 * The order of a partition's versions by (key, ts), which a task computes before it packs them
 * into a {@link Runs.Run}.
 *
 * <p>Why a radix sort: a comparison sort of positions reads each compared version's key and ts
 * through its position, a cache miss apiece once a partition outgrows the cache, and that sort
 * was over half of what the tasks of a one-off index spent on 1M versions. A least significant
 * digit radix sort instead streams the (key, ts, position) triples through the passes in order,
 * and makes passes only over the digits that vary (a day of millisecond timestamps varies in 27
 * bits, 100k dense keys in 17): five passes of 11 bits where a comparison sort makes twenty.
 * Small partitions keep the comparison sort, whose setup is cheaper, and so do partitions of
 * more than 4M versions: the radix sort's buffers take 40 bytes a version where the comparison
 * sort's positions take 4, and a partition of a table too large to broadcast (the index's shuffle
 * form) may hold tens of millions.
 */
final class VersionSort {
  private static final int RADIX_MIN = 2048;
  private static final int RADIX_MAX = 1 << 22;
  private static final int BITS = 11;
  private static final int BUCKETS = 1 << BITS;

  private VersionSort() {}

  /**
   * Positions 0..n-1 of keys/ts ordered by (key, ts). Equal pairs come in either order: the merge
   * resolves them by their sequence.
   */
  static int[] order(long[] keys, long[] ts, int n) {
    if (n < RADIX_MIN || n > RADIX_MAX) {
      int[] order = new int[n];
      for (int i = 0; i < n; i++) order[i] = i;
      sort(order, keys, ts, 0, n - 1);
      return order;
    }
    long[] k = java.util.Arrays.copyOf(keys, n);
    long[] t = java.util.Arrays.copyOf(ts, n);
    int[] at = new int[n];
    for (int i = 0; i < n; i++) at[i] = i;
    long[] k2 = new long[n];
    long[] t2 = new long[n];
    int[] at2 = new int[n];
    int[] count = new int[BUCKETS];
    // Signed order is unsigned order with the sign bit flipped; a digit no value varies in is skipped.
    long tVary = varying(t, n);
    long kVary = varying(k, n);
    for (int pass = 0; pass < 2; pass++) {  // ts first: the key's passes are stable over its order
      long vary = pass == 0 ? tVary : kVary;
      for (int shift = 0; shift < 64; shift += BITS) {
        if (((vary >>> shift) & (BUCKETS - 1)) == 0) continue;
        long[] digits = pass == 0 ? t : k;
        java.util.Arrays.fill(count, 0);
        for (int i = 0; i < n; i++) count[digit(digits[i], shift)]++;
        int sum = 0;
        for (int b = 0; b < BUCKETS; b++) {
          int c = count[b];
          count[b] = sum;
          sum += c;
        }
        for (int i = 0; i < n; i++) {
          int to = count[digit(digits[i], shift)]++;
          k2[to] = k[i];
          t2[to] = t[i];
          at2[to] = at[i];
        }
        long[] swapK = k; k = k2; k2 = swapK;
        long[] swapT = t; t = t2; t2 = swapT;
        int[] swapAt = at; at = at2; at2 = swapAt;
      }
    }
    return at;
  }

  private static int digit(long v, int shift) {
    return (int) (((v ^ Long.MIN_VALUE) >>> shift) & (BUCKETS - 1));
  }

  /** The bits in which some value differs from the first. */
  private static long varying(long[] v, int n) {
    long first = v[0];
    long vary = 0;
    for (int i = 1; i < n; i++) vary |= v[i] ^ first;
    return vary;
  }

  private static boolean less(long[] k, long[] t, int a, int b) {
    return k[a] < k[b] || (k[a] == k[b] && t[a] < t[b]);
  }

  /** Sorts positions by (k, t): quicksort with random pivots on primitives (no boxing). */
  static void sort(int[] order, long[] k, long[] t, int lo, int hi) {
    while (hi - lo > 16) {
      int pivot = order[lo + java.util.concurrent.ThreadLocalRandom.current().nextInt(hi - lo + 1)];
      int i = lo;
      int j = hi;
      while (i <= j) {
        while (less(k, t, order[i], pivot)) i++;
        while (less(k, t, pivot, order[j])) j--;
        if (i <= j) {
          int x = order[i];
          order[i] = order[j];
          order[j] = x;
          i++;
          j--;
        }
      }
      if (j - lo < hi - i) {  // recurse into the smaller side: stack depth stays logarithmic
        sort(order, k, t, lo, j);
        lo = i;
      } else {
        sort(order, k, t, i, hi);
        hi = j;
      }
    }
    for (int i = lo + 1; i <= hi; i++) {
      for (int j = i; j > lo && less(k, t, order[j], order[j - 1]); j--) {
        int x = order[j];
        order[j] = order[j - 1];
        order[j - 1] = x;
      }
    }
  }
}
