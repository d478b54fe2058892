package temporaljoins;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.PriorityQueue;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BasePredicate;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.EqualNullSafe;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.sql.catalyst.expressions.Predicate;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The broadcast as-of join: the (small) versioned table becomes a {@link VersionIndex} shipped to
 * every task, and the stream is probed where it lies, with no shuffle and no sort of the stream.
 *
 * <p>Spark has no as-of join operator; this is one, written against Spark's row format so that
 * rows never leave the JVM. Called from Python (joins/asof/index.py), which validates the inputs
 * and passes both sides' column positions.
 */
public final class AsOfJoin {
  private AsOfJoin() {}

  /** One table partition's versions, sorted by (key, ts) on the executor. */
  static final class Run implements Serializable {
    private static final long serialVersionUID = 1L;
    long[] keys;
    long[] ts;
    boolean[] tombstone;
    byte[] values;
    int[] offsets;
    int n;
  }

  /**
   * Builds and broadcasts the index of a table: key and ts are integer or timestamp columns (rows
   * with a null key are skipped: they match nothing; a null ts fails naming the field), tombOrd a
   * boolean column or -1, valueOrds the columns each answer carries, output as valueNames.
   *
   * <p>Runs one Spark job: each task packs and sorts its partition; the driver merges the sorted
   * runs, as Spark's own broadcast joins build their hashed relation on the driver.
   *
   * @param retention history retention in ts units, when hasRetention
   * @param streamTime the table's stream time in ts units, when hasStreamTime; else its max ts
   * @param nullTs, duplicate the messages of a null ts and of a (key, ts) seen twice (a
   *     {@link RecordMessage} template each): both fail with IllegalArgumentException
   * @param keyCheckField -1 when keyOrd is the key itself; else keyOrd holds a 64-bit hash of the
   *     key and value field keyCheckField the key: two keys sharing a hash fail with HASH_COLLISION
   *     (the caller falls back to a plan without the index), and probes compare the key itself.
   */
  public static Broadcast<VersionIndex> index(Dataset<Row> table, int keyOrd, int tsOrd, int tombOrd,
                                               List<Integer> valueOrds, List<String> valueNames,
                                               boolean hasRetention, long retention, boolean hasStreamTime,
                                               long streamTime, List<String> nullTs, List<String> duplicate,
                                               int keyCheckField) {
    org.apache.spark.sql.classic.Dataset<Row> t = (org.apache.spark.sql.classic.Dataset<Row>) table;
    StructField[] fields = t.schema().fields();
    String timeZone = t.sparkSession().sessionState().conf().sessionLocalTimeZone();
    int keyCode = Columns.code(fields[keyOrd].dataType(), "the table key");
    int tsCode = Columns.code(fields[tsOrd].dataType(), "the table ts");
    int[] ords = valueOrds.stream().mapToInt(Integer::intValue).toArray();
    StructField[] valueFields = new StructField[ords.length];
    DataType[] valueTypes = new DataType[ords.length];
    for (int i = 0; i < ords.length; i++) {
      StructField f = fields[ords[i]];
      valueFields[i] = new StructField(valueNames.get(i), f.dataType(), true, f.metadata());
      valueTypes[i] = f.dataType();
    }
    // A hashed key is named by the key itself: the table's key column, a version's key copy.
    int keyTextOrd = keyCheckField < 0 ? keyOrd : ords[keyCheckField];
    Layout layout = new Layout(keyOrd, keyCode, tsOrd, tsCode, tombOrd, ords, valueTypes,
        new RecordMessage(nullTs), new ValueText(keyTextOrd, fields[keyTextOrd].dataType(), timeZone));
    List<Run> runs = t.queryExecution().toRdd().toJavaRDD()
        .mapPartitions((Iterator<InternalRow> rows) -> Collections.singletonList(pack(rows, layout)).iterator())
        .collect();
    RecordMessage duplicateMessage = new RecordMessage(duplicate);
    DataType tsType = fields[tsOrd].dataType();
    Run all = merge(runs, (run, i) -> {
      String key = Long.toString(run.keys[i]);
      if (keyCheckField >= 0) {
        // Equal hashes and equal ts: the same key twice, or two keys sharing a hash.
        UnsafeRow version = pointTo(new UnsafeRow(valueTypes.length), run, i);
        if (!sameKey(valueTypes, keyCheckField).eval(
            new JoinedRow(pointTo(new UnsafeRow(valueTypes.length), run, i - 1), version))) {
          return collision(run.keys[i]);
        }
        key = new ValueText(keyCheckField, valueTypes[keyCheckField], timeZone).of(version);
      }
      return new IllegalArgumentException(duplicateMessage.fill(key, ValueText.ts(run.ts[i], tsType, timeZone)));
    });
    if (keyCheckField >= 0) checkNoCollision(all, valueTypes, keyCheckField);
    long maxTs = Long.MIN_VALUE;
    for (int i = 0; i < all.n; i++) maxTs = Math.max(maxTs, all.ts[i]);
    long now = hasStreamTime ? streamTime : maxTs;
    long bound = saturatingSubtract(now, retention);
    VersionIndex index = new VersionIndex(all.keys, all.ts, all.tombstone, all.values, all.offsets,
        new StructType(valueFields), hasRetention && all.n > 0, bound);
    return JavaSparkContext.fromSparkContext(t.sparkSession().sparkContext()).broadcast(index);
  }

  /** Where the table's columns are, for the tasks that pack it. */
  static final class Layout implements Serializable {
    private static final long serialVersionUID = 1L;
    final int keyOrd;
    final int keyCode;
    final int tsOrd;
    final int tsCode;
    final int tombOrd;
    final int[] valueOrds;
    final DataType[] valueTypes;
    final RecordMessage nullTs;
    final ValueText keyText;

    Layout(int keyOrd, int keyCode, int tsOrd, int tsCode, int tombOrd, int[] valueOrds, DataType[] valueTypes,
           RecordMessage nullTs, ValueText keyText) {
      this.keyOrd = keyOrd;
      this.keyCode = keyCode;
      this.tsOrd = tsOrd;
      this.tsCode = tsCode;
      this.tombOrd = tombOrd;
      this.valueOrds = valueOrds;
      this.valueTypes = valueTypes;
      this.nullTs = nullTs;
      this.keyText = keyText;
    }
  }

  /**
   * The join: each stream row looks up the version of key keyOrd at ts tsOrd (integer or
   * timestamp columns, as the table's; a null key matches nothing, a null ts fails naming the
   * field, nullTs a {@link RecordMessage} template). Output: every stream column, then the index's value columns (null where no version
   * answers; rows without an answer are dropped unless left).
   */
  public static Dataset<Row> probe(Dataset<Row> stream, int keyOrd, int tsOrd, Broadcast<VersionIndex> index,
                                   boolean left, List<String> nullTs, int keyCheckOrd, int keyCheckField) {
    org.apache.spark.sql.classic.Dataset<Row> s = (org.apache.spark.sql.classic.Dataset<Row>) stream;
    StructField[] streamFields = s.schema().fields();
    // A hashed key is named by the key itself (keyCheckOrd), not by its hash.
    int keyTextOrd = keyCheckOrd < 0 ? keyOrd : keyCheckOrd;
    ValueText keyText = new ValueText(keyTextOrd, streamFields[keyTextOrd].dataType(),
        s.sparkSession().sessionState().conf().sessionLocalTimeZone());
    RecordMessage nullTsMessage = new RecordMessage(nullTs);
    int keyCode = Columns.code(streamFields[keyOrd].dataType(), "the stream key");
    int tsCode = Columns.code(streamFields[tsOrd].dataType(), "the stream ts");
    List<StructField> out = new ArrayList<>(Arrays.asList(streamFields));
    out.addAll(Arrays.asList(index.value().valueSchema().fields()));
    StructType outSchema = new StructType(out.toArray(new StructField[0]));
    // The rows handed on are (stream row ++ value row) views; the scan over this RDD copies each
    // into an UnsafeRow before the next one is asked for, so no projection is needed here.
    RDD<InternalRow> rdd = s.queryExecution().toRdd().toJavaRDD().mapPartitions((Iterator<InternalRow> rows) ->
        (Iterator<InternalRow>) new BatchProbe(rows, index.value(), keyOrd, keyCode, tsOrd, tsCode, left,
            nullTsMessage, keyText, keyCheck(streamFields, keyCheckOrd, keyCheckField))).rdd();
    return s.sparkSession().internalCreateDataFrame(rdd, outSchema, false);
  }

  /** The probe's check that a hashed key's answer is for the key itself: stream key <=> value key. */
  static Expression keyCheck(StructField[] streamFields, int keyCheckOrd, int keyCheckField) {
    if (keyCheckOrd < 0) return null;
    DataType type = streamFields[keyCheckOrd].dataType();
    return new EqualNullSafe(new BoundReference(keyCheckOrd, type, true),
        new BoundReference(streamFields.length + keyCheckField, type, true));
  }

  /** Versions sharing a hashed key must share the key itself. */
  static void checkNoCollision(Run all, DataType[] valueTypes, int keyCheckField) {
    BasePredicate same = sameKey(valueTypes, keyCheckField);
    UnsafeRow first = new UnsafeRow(valueTypes.length);
    UnsafeRow other = new UnsafeRow(valueTypes.length);
    JoinedRow pair = new JoinedRow();
    int start = 0;
    for (int i = 1; i < all.n; i++) {
      if (all.keys[i] != all.keys[start]) {
        start = i;
        continue;
      }
      if (!same.eval(pair.apply(pointTo(first, all, start), pointTo(other, all, i)))) throw collision(all.keys[i]);
    }
  }

  /** (version ++ version) -> whether both carry the same key (null-safe, as the probe compares). */
  static BasePredicate sameKey(DataType[] valueTypes, int keyCheckField) {
    DataType type = valueTypes[keyCheckField];
    BasePredicate same = Predicate.create(new EqualNullSafe(new BoundReference(keyCheckField, type, true),
        new BoundReference(valueTypes.length + keyCheckField, type, true)));
    same.initialize(0);
    return same;
  }

  /** The caller (joins/asof) falls back to a plan without the index on this message. */
  static IllegalStateException collision(long hash) {
    return new IllegalStateException("HASH_COLLISION: two table keys share the 64-bit hash " + hash);
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
    int cap = 1024;
    long[] keys = new long[cap];
    long[] ts = new long[cap];
    boolean[] tomb = new boolean[cap];
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
        offsets = Arrays.copyOf(offsets, cap + 1);
      }
      keys[n] = Columns.read(r, layout.keyOrd, layout.keyCode);
      ts[n] = Columns.read(r, layout.tsOrd, layout.tsCode);
      tomb[n] = layout.tombOrd >= 0 && !r.isNullAt(layout.tombOrd) && r.getBoolean(layout.tombOrd);
      UnsafeRow v = valuesOf.apply(r);
      int size = v.getSizeInBytes();
      if ((long) used + size > Integer.MAX_VALUE - 16) {
        throw new IllegalStateException("as-of index: a table partition holds over 2 GiB of values; "
            + "this table is too large to broadcast (use the shuffle strategy)");
      }
      if (used + size > bytes.length) {
        bytes = Arrays.copyOf(bytes, (int) Math.min(Integer.MAX_VALUE - 16, Math.max(2L * bytes.length, (long) used + size)));
      }
      v.writeToMemory(bytes, Platform.BYTE_ARRAY_OFFSET + used);
      used += size;
      offsets[++n] = used;
    }
    int[] order = new int[n];
    for (int i = 0; i < n; i++) order[i] = i;
    sort(order, keys, ts, 0, n - 1);
    Run run = new Run();
    run.n = n;
    run.keys = new long[n];
    run.ts = new long[n];
    run.tombstone = new boolean[n];
    run.values = new byte[used];
    run.offsets = new int[n + 1];
    int at = 0;
    for (int i = 0; i < n; i++) {
      int p = order[i];
      run.keys[i] = keys[p];
      run.ts[i] = ts[p];
      run.tombstone[i] = tomb[p];
      int len = offsets[p + 1] - offsets[p];
      System.arraycopy(bytes, offsets[p], run.values, at, len);
      at += len;
      run.offsets[i + 1] = at;
    }
    return run;
  }

  /** What a (key, ts) seen twice at positions i - 1 and i of the merged run fails with. */
  interface Duplicate {
    RuntimeException at(Run merged, int i);
  }

  /** Merges sorted runs into one; a (key, ts) seen twice fails with duplicate's exception. */
  static Run merge(List<Run> runs, Duplicate duplicate) {
    int n = 0;
    long bytes = 0;
    for (Run r : runs) {
      n += r.n;
      bytes += r.values.length;
    }
    if (bytes > Integer.MAX_VALUE - 16) {
      throw new IllegalStateException("as-of index: the table holds " + bytes + " bytes of values, "
          + "over the 2 GiB an index can hold; use the shuffle strategy");
    }
    Run all = new Run();
    all.n = n;
    all.keys = new long[n];
    all.ts = new long[n];
    all.tombstone = new boolean[n];
    all.values = new byte[(int) bytes];
    all.offsets = new int[n + 1];
    int[] cursor = new int[runs.size()];
    PriorityQueue<Integer> heads = new PriorityQueue<>((a, b) -> {
      Run x = runs.get(a);
      Run y = runs.get(b);
      long kx = x.keys[cursor[a]];
      long ky = y.keys[cursor[b]];
      return kx != ky ? Long.compare(kx, ky) : Long.compare(x.ts[cursor[a]], y.ts[cursor[b]]);
    });
    for (int i = 0; i < runs.size(); i++) {
      if (runs.get(i).n > 0) heads.add(i);
    }
    int used = 0;
    for (int i = 0; i < n; i++) {
      int ri = heads.poll();
      Run r = runs.get(ri);
      int c = cursor[ri];
      all.keys[i] = r.keys[c];
      all.ts[i] = r.ts[c];
      all.tombstone[i] = r.tombstone[c];
      int len = r.offsets[c + 1] - r.offsets[c];
      System.arraycopy(r.values, r.offsets[c], all.values, used, len);
      used += len;
      all.offsets[i + 1] = used;
      if (i > 0 && all.keys[i] == all.keys[i - 1] && all.ts[i] == all.ts[i - 1]) {
        throw duplicate.at(all, i);
      }
      cursor[ri] = c + 1;
      if (c + 1 < r.n) heads.add(ri);
    }
    return all;
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

  static long saturatingSubtract(long a, long b) {
    long d = a - b;
    // Overflow iff a and b have different signs and d's sign differs from a's.
    if (((a ^ b) & (a ^ d)) < 0) return a < 0 ? Long.MIN_VALUE : Long.MAX_VALUE;
    return d;
  }
}
