package temporaljoins;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.PriorityQueue;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.unsafe.Platform;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Sorted runs of table versions: what a task packs from its partition and what the driver merges
 * into a {@link VersionIndex} (or keeps, in {@link IndexCache}, to merge a later batch into).
 *
 * <p>A version may carry a sequence (the versioned table's (batch_id, arrival)): a (key, ts) put
 * twice is then resolved as the versioned store resolves it, the later sequence wins. Without a
 * sequence a (key, ts) seen twice is an error (an as-of join's table has one version per (key, ts)).
 */
final class Runs {
  private static final int SCANNED_RUNS = 8;

  private Runs() {}

  /** Versions sorted by (key, ts); seq holds `width` longs per version. */
  static final class Run implements Serializable {
    private static final long serialVersionUID = 2L;
    long[] keys;
    long[] ts;
    boolean[] tombstone;
    byte[] values;
    int[] offsets;
    long[] seq;
    int width;
    int n;
  }

  /** Where the table's columns are, for the tasks that pack it. */
  static final class Layout implements Serializable {
    private static final long serialVersionUID = 2L;
    final int keyOrd;
    final int keyCode;
    final int tsOrd;
    final int tsCode;
    final int tombOrd;
    final int[] valueOrds;
    final DataType[] valueTypes;
    final int[] seqOrds;
    final int[] seqCodes;
    final RecordMessage nullTs;
    final ValueText keyText;

    Layout(int keyOrd, int keyCode, int tsOrd, int tsCode, int tombOrd, int[] valueOrds, DataType[] valueTypes,
           int[] seqOrds, int[] seqCodes, RecordMessage nullTs, ValueText keyText) {
      this.keyOrd = keyOrd;
      this.keyCode = keyCode;
      this.tsOrd = tsOrd;
      this.tsCode = tsCode;
      this.tombOrd = tombOrd;
      this.valueOrds = valueOrds;
      this.valueTypes = valueTypes;
      this.seqOrds = seqOrds;
      this.seqCodes = seqCodes;
      this.nullTs = nullTs;
      this.keyText = keyText;
    }
  }

  /** What a (key, ts) seen twice fails with: the version at merged[i] and the one arriving. */
  interface Duplicate {
    /** Two different keys behind one hash (the caller's fallback), or null when the keys agree. */
    RuntimeException collision(Run merged, int i, Run other, int j);

    /** The same (key, ts) twice with no sequence to tell them apart. */
    RuntimeException twice(Run merged, int i);
  }

  /** row pointed at version i's value columns. */
  static UnsafeRow pointTo(UnsafeRow row, Run run, int i) {
    row.pointTo(run.values, Platform.BYTE_ARRAY_OFFSET + run.offsets[i], run.offsets[i + 1] - run.offsets[i]);
    return row;
  }

  static Run pack(Iterator<InternalRow> rows, Layout layout) {
    List<Expression> refs = new ArrayList<>();
    for (int i = 0; i < layout.valueOrds.length; i++) {
      refs.add(new BoundReference(layout.valueOrds[i], layout.valueTypes[i], true));
    }
    UnsafeProjection valuesOf = UnsafeProjection.create(CollectionConverters.asScala(refs).toSeq());
    int width = layout.seqOrds.length;
    int cap = 1024;
    long[] keys = new long[cap];
    long[] ts = new long[cap];
    boolean[] tomb = new boolean[cap];
    long[] seq = new long[cap * width];
    int[] offsets = new int[cap + 1];
    byte[] bytes = new byte[1 << 16];
    int n = 0;
    int used = 0;
    while (rows.hasNext()) {
      InternalRow r = rows.next();
      if (r.isNullAt(layout.keyOrd)) continue;  // a null key matches nothing
      if (r.isNullAt(layout.tsOrd)) throw new IllegalArgumentException(layout.nullTs.fill(layout.keyText.of(r), null));
      if (n == cap) {
        cap *= 2;
        keys = Arrays.copyOf(keys, cap);
        ts = Arrays.copyOf(ts, cap);
        tomb = Arrays.copyOf(tomb, cap);
        seq = Arrays.copyOf(seq, cap * width);
        offsets = Arrays.copyOf(offsets, cap + 1);
      }
      keys[n] = Columns.read(r, layout.keyOrd, layout.keyCode);
      ts[n] = Columns.read(r, layout.tsOrd, layout.tsCode);
      tomb[n] = layout.tombOrd >= 0 && !r.isNullAt(layout.tombOrd) && r.getBoolean(layout.tombOrd);
      for (int s = 0; s < width; s++) {
        int ord = layout.seqOrds[s];
        seq[n * width + s] = r.isNullAt(ord) ? Long.MIN_VALUE : Columns.read(r, ord, layout.seqCodes[s]);
      }
      UnsafeRow v = valuesOf.apply(r);
      int size = v.getSizeInBytes();
      if ((long) used + size > Integer.MAX_VALUE - 16) {
        throw new IllegalStateException("as-of index: a table partition holds over 2 GiB of values; "
            + "too large to index in memory (use the strategy 'index_shuffle' with more shuffle partitions, "
            + "or 'shuffle')");
      }
      if (used + size > bytes.length) {
        bytes = Arrays.copyOf(bytes, (int) Math.min(Integer.MAX_VALUE - 16, Math.max(2L * bytes.length, (long) used + size)));
      }
      v.writeToMemory(bytes, Platform.BYTE_ARRAY_OFFSET + used);
      used += size;
      offsets[++n] = used;
    }
    int[] order = VersionSort.order(keys, ts, n);
    Run run = allocate(n, width, used);
    int at = 0;
    for (int i = 0; i < n; i++) {
      int p = order[i];
      run.keys[i] = keys[p];
      run.ts[i] = ts[p];
      run.tombstone[i] = tomb[p];
      System.arraycopy(seq, p * width, run.seq, i * width, width);
      int len = offsets[p + 1] - offsets[p];
      System.arraycopy(bytes, offsets[p], run.values, at, len);
      at += len;
      run.offsets[i + 1] = at;
    }
    run.n = n;
    return run;
  }

  static Run allocate(int n, int width, int bytes) {
    Run run = new Run();
    run.keys = new long[n];
    run.ts = new long[n];
    run.tombstone = new boolean[n];
    run.seq = new long[n * width];
    run.width = width;
    run.values = new byte[bytes];
    run.offsets = new int[n + 1];
    return run;
  }

  /** Merges sorted runs (of one width) into one with each (key, ts) once. */
  static Run merge(List<Run> runs, Duplicate duplicate) {
    int n = 0;
    long bytes = 0;
    int width = runs.isEmpty() ? 0 : runs.get(0).width;
    for (Run r : runs) {
      n += r.n;
      bytes += r.offsets[r.n];
    }
    if (bytes > Integer.MAX_VALUE - 16) {
      throw new IllegalStateException("as-of index: the table holds " + bytes + " bytes of values, "
          + "over the 2 GiB an index can hold; use the strategy 'index_shuffle' or 'shuffle'");
    }
    Run all = allocate(n, width, (int) bytes);
    Run[] rs = runs.toArray(new Run[0]);
    int[] cursor = new int[rs.length];
    // A table read by a few tasks gives a few runs: the next version is then found by a scan of
    // their heads, with no heap and no boxing (a 1M-version merge of 2 runs: 40-80 ms by heap).
    PriorityQueue<Integer> heads = rs.length <= SCANNED_RUNS ? null
        : new PriorityQueue<>((a, b) -> compareHeads(rs, cursor, a, b));
    for (int i = 0; heads != null && i < rs.length; i++) {
      if (rs[i].n > 0) heads.add(i);
    }
    int m = 0;  // versions kept so far
    int used = 0;
    while (true) {
      int ri = heads == null ? smallestHead(rs, cursor) : heads.isEmpty() ? -1 : heads.poll();
      if (ri < 0) break;
      Run r = rs[ri];
      int c = cursor[ri];
      cursor[ri] = c + 1;
      if (heads != null && c + 1 < r.n) heads.add(ri);
      int at = m;
      if (m > 0 && all.keys[m - 1] == r.keys[c] && all.ts[m - 1] == r.ts[c]) {
        RuntimeException collision = duplicate.collision(all, m - 1, r, c);
        if (collision != null) throw collision;
        int order = compareSeq(all.seq, (m - 1) * width, r.seq, c * width, width);
        if (width == 0 || order == 0) throw duplicate.twice(all, m - 1);
        if (order > 0) continue;  // the version kept is the later put
        at = m - 1;  // the arriving version is the later put: it replaces the one kept
        used = all.offsets[at];
      }
      all.keys[at] = r.keys[c];
      all.ts[at] = r.ts[c];
      all.tombstone[at] = r.tombstone[c];
      System.arraycopy(r.seq, c * width, all.seq, at * width, width);
      int len = r.offsets[c + 1] - r.offsets[c];
      System.arraycopy(r.values, r.offsets[c], all.values, used, len);
      used += len;
      all.offsets[at + 1] = used;
      m = at + 1;
    }
    all.n = m;
    if (m < n) {  // duplicates resolved: the index wants arrays of exactly its versions
      all.keys = Arrays.copyOf(all.keys, m);
      all.ts = Arrays.copyOf(all.ts, m);
      all.tombstone = Arrays.copyOf(all.tombstone, m);
      all.seq = Arrays.copyOf(all.seq, m * width);
      all.offsets = Arrays.copyOf(all.offsets, m + 1);
    }
    return all;
  }

  /** The run whose next version comes first in (key, ts) order; -1 when all are done. */
  private static int smallestHead(Run[] rs, int[] cursor) {
    int best = -1;
    for (int i = 0; i < rs.length; i++) {
      int c = cursor[i];
      if (c >= rs[i].n) continue;
      if (best < 0 || compareHeads(rs, cursor, i, best) < 0) best = i;
    }
    return best;
  }

  /** Runs a and b by their next versions, in (key, ts) order. */
  private static int compareHeads(Run[] rs, int[] cursor, int a, int b) {
    long ka = rs[a].keys[cursor[a]];
    long kb = rs[b].keys[cursor[b]];
    return ka != kb ? Long.compare(ka, kb) : Long.compare(rs[a].ts[cursor[a]], rs[b].ts[cursor[b]]);
  }

  static int compareSeq(long[] a, int from, long[] b, int bFrom, int width) {
    for (int s = 0; s < width; s++) {
      int c = Long.compare(a[from + s], b[bFrom + s]);
      if (c != 0) return c;
    }
    return 0;
  }

  /** The first position of run at or after (key, ts) in (key, ts) order; run.n when none. */
  static int lowerBound(Run run, long key, long ts) {
    int lo = 0;
    int hi = run.n;
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (run.keys[mid] < key || (run.keys[mid] == key && run.ts[mid] < ts)) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  /** run without the versions marked in drop (dropped of them), in order. */
  static Run without(Run run, boolean[] drop, int dropped) {
    int bytes = 0;
    for (int i = 0; i < run.n; i++) {
      if (!drop[i]) bytes += run.offsets[i + 1] - run.offsets[i];
    }
    Run kept = allocate(run.n - dropped, run.width, bytes);
    int m = 0;
    int used = 0;
    for (int i = 0; i < run.n; i++) {
      if (drop[i]) continue;
      kept.keys[m] = run.keys[i];
      kept.ts[m] = run.ts[i];
      kept.tombstone[m] = run.tombstone[i];
      System.arraycopy(run.seq, i * run.width, kept.seq, m * run.width, run.width);
      int len = run.offsets[i + 1] - run.offsets[i];
      System.arraycopy(run.values, run.offsets[i], kept.values, used, len);
      used += len;
      kept.offsets[++m] = used;
    }
    kept.n = m;
    return kept;
  }
}
