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
import org.apache.spark.sql.catalyst.expressions.BoundReference;
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
 * rows never leave the JVM. Called from Python (joins/operators/stream_table_join/spark_batch.py),
 * which validates the inputs and projects both sides into the layouts documented below.
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
   * Builds and broadcasts the index of a table laid out as: key (long, not null), ts (long, not
   * null), tombstone (boolean, not null), then the value columns.
   *
   * <p>Runs one Spark job: each task packs and sorts its partition; the driver merges the sorted
   * runs, as Spark's own broadcast joins build their hashed relation on the driver.
   *
   * @param retention history retention in ts units, when hasRetention
   * @param streamTime the table's stream time in ts units, when hasStreamTime; else its max ts
   * @param duplicatePrefix, duplicateSuffix the error text around "key, ts" when a (key, ts) repeats
   */
  public static Broadcast<VersionIndex> index(Dataset<Row> table, boolean hasRetention, long retention,
                                               boolean hasStreamTime, long streamTime,
                                               String duplicatePrefix, String duplicateSuffix) {
    org.apache.spark.sql.classic.Dataset<Row> t = (org.apache.spark.sql.classic.Dataset<Row>) table;
    StructField[] fields = t.schema().fields();
    int valueFields = fields.length - 3;
    DataType[] valueTypes = new DataType[valueFields];
    for (int i = 0; i < valueFields; i++) valueTypes[i] = fields[i + 3].dataType();
    List<Run> runs = t.queryExecution().toRdd().toJavaRDD()
        .mapPartitions((Iterator<InternalRow> rows) -> Collections.singletonList(pack(rows, valueTypes)).iterator())
        .collect();
    Run all = merge(runs, duplicatePrefix, duplicateSuffix);
    long maxTs = Long.MIN_VALUE;
    for (int i = 0; i < all.n; i++) maxTs = Math.max(maxTs, all.ts[i]);
    long now = hasStreamTime ? streamTime : maxTs;
    long bound = saturatingSubtract(now, retention);
    StructType valueSchema = new StructType(Arrays.copyOfRange(fields, 3, fields.length));
    VersionIndex index = new VersionIndex(all.keys, all.ts, all.tombstone, all.values, all.offsets,
        valueSchema, hasRetention && all.n > 0, bound);
    return JavaSparkContext.fromSparkContext(t.sparkSession().sparkContext()).broadcast(index);
  }

  /**
   * The join: stream laid out as its output columns followed by the lookup key (long, nullable)
   * and the ts (long, not null). Output: the stream's output columns, then the table's value
   * columns (null where no version answers; rows without an answer are dropped unless left).
   */
  public static Dataset<Row> probe(Dataset<Row> stream, Broadcast<VersionIndex> index, boolean left) {
    org.apache.spark.sql.classic.Dataset<Row> s = (org.apache.spark.sql.classic.Dataset<Row>) stream;
    StructField[] streamFields = s.schema().fields();
    int keyField = streamFields.length - 2;
    StructField[] valueFieldsArr = index.value().valueSchema().fields();
    List<StructField> out = new ArrayList<>();
    DataType[] types = new DataType[keyField + valueFieldsArr.length];
    for (int i = 0; i < keyField; i++) {
      out.add(streamFields[i]);
      types[i] = streamFields[i].dataType();
    }
    for (int i = 0; i < valueFieldsArr.length; i++) {
      StructField f = valueFieldsArr[i];
      out.add(new StructField(f.name(), f.dataType(), true, f.metadata()));
      types[keyField + i] = f.dataType();
    }
    StructType outSchema = new StructType(out.toArray(new StructField[0]));
    RDD<InternalRow> rdd = s.queryExecution().toRdd().toJavaRDD().mapPartitions((Iterator<InternalRow> rows) -> {
      List<Expression> refs = new ArrayList<>();
      for (int i = 0; i < keyField; i++) refs.add(new BoundReference(i, types[i], true));
      // The joined row is (stream row with key and ts) ++ (value row): values start at keyField + 2.
      for (int i = keyField; i < types.length; i++) refs.add(new BoundReference(i + 2, types[i], true));
      UnsafeProjection project = UnsafeProjection.create(CollectionConverters.asScala(refs).toSeq());
      return new BatchProbe(rows, index.value(), project, keyField, left);
    }).rdd();
    return s.sparkSession().internalCreateDataFrame(rdd, outSchema, false);
  }

  static Run pack(Iterator<InternalRow> rows, DataType[] valueTypes) {
    List<Expression> refs = new ArrayList<>();
    for (int i = 0; i < valueTypes.length; i++) refs.add(new BoundReference(i + 3, valueTypes[i], true));
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
      if (n == cap) {
        cap *= 2;
        keys = Arrays.copyOf(keys, cap);
        ts = Arrays.copyOf(ts, cap);
        tomb = Arrays.copyOf(tomb, cap);
        offsets = Arrays.copyOf(offsets, cap + 1);
      }
      keys[n] = r.getLong(0);
      ts[n] = r.getLong(1);
      tomb[n] = r.getBoolean(2);
      UnsafeRow v = valuesOf.apply(r);
      int size = v.getSizeInBytes();
      if ((long) used + size > Integer.MAX_VALUE - 16) {
        throw new IllegalStateException("as-of index: a table partition holds over 2 GiB of values; "
            + "this table is too large to broadcast (use the shuffle strategy)");
      }
      if (used + size > bytes.length) bytes = Arrays.copyOf(bytes, (int) Math.min(Integer.MAX_VALUE - 16,
          Math.max(2L * bytes.length, (long) used + size)));
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

  /** Merges sorted runs into one; a (key, ts) seen twice fails with the caller's message. */
  static Run merge(List<Run> runs, String duplicatePrefix, String duplicateSuffix) {
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
        throw new IllegalArgumentException(duplicatePrefix + all.keys[i] + ", " + all.ts[i] + duplicateSuffix);
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
