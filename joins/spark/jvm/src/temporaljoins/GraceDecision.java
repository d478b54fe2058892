package temporaljoins;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.PriorityQueue;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A small micro-batch's grace decision (seed 001, KIP-923), record at a time in one Spark task.
 *
 * <p>The same decision as joins/operators/stream_table_join/sequential.py's decide_rows, which
 * runs the reference processor's GraceBuffer in a Python worker: that path remains for sessions
 * without these classes (Spark Connect). Here the rows never leave the JVM: on a 10k-event batch
 * the Python worker's Arrow round trip was most of the decision's task time (measured). The
 * property tests hold both kernels equal to the reference processor.
 *
 * <p>Input: the batch's new records and the buffer it starts from (the same columns), brought
 * into one partition. Output: every row, new ones first, with CLASS, P_BEFORE, FATE, EMIT_SEQ,
 * LATE and (when stamped) BATCH_ID added.
 */
public final class GraceDecision {
  private GraceDecision() {}

  // The classes and fates of grace.py (CLASSES, JOIN_FATE...): the Python caller passes them in
  // this order, so the strings are written once, in Python.
  static final int SKIPPED_NULL_VALUE = 0;
  static final int SKIPPED_NULL_KEY = 1;
  static final int LATE = 2;
  static final int PUT = 3;
  static final int JOINED = 4;
  static final int JOIN_FATE = 0;
  static final int KEEP_FATE = 1;
  static final int LATE_FATE = 2;  // lateFate's name (null: a late record is dropped)

  /**
   * @param names the output's new columns: CLASS, P_BEFORE, FATE, EMIT_SEQ, LATE[, BATCH_ID]
   * @param classes the class names, in the order of the constants above
   * @param fates the join and keep fate names
   * @param lateFate the fate of a late record (null: dropped)
   * @param nullTsMarker the failure text of a non-skipped record without a ts, before its seq
   */
  public static Dataset<Row> decide(Dataset<Row> fresh, Dataset<Row> buffer, int tsOrd, int seqOrd, int keyOrd,
                                    List<Integer> valueOrds, boolean hasGrace, long graceMs, String lateFate,
                                    boolean inner, boolean hasStreamTime, long streamTimeBefore,
                                    boolean stamped, long batchId, List<String> names, List<String> classes,
                                    List<String> fates, String nullTsMarker) {
    org.apache.spark.sql.classic.Dataset<Row> s = (org.apache.spark.sql.classic.Dataset<Row>) fresh;
    StructField[] in = s.schema().fields();
    if (buffer != null) in = sameColumns(in, buffer.schema().fields());
    int tsCode = Columns.code(in[tsOrd].dataType(), "the stream ts");
    int seqCode = Columns.code(in[seqOrd].dataType(), "the stream seq");
    DataType[] types = new DataType[in.length];
    List<StructField> out = new ArrayList<>(Arrays.asList(in));
    for (int i = 0; i < in.length; i++) types[i] = in[i].dataType();
    out.add(DataTypes.createStructField(names.get(0), DataTypes.StringType, true));
    out.add(DataTypes.createStructField(names.get(1), DataTypes.LongType, true));
    out.add(DataTypes.createStructField(names.get(2), DataTypes.StringType, true));
    out.add(DataTypes.createStructField(names.get(3), DataTypes.LongType, true));
    out.add(DataTypes.createStructField(names.get(4), DataTypes.BooleanType, false));
    if (stamped) out.add(DataTypes.createStructField(names.get(5), DataTypes.LongType, false));
    StructType outSchema = new StructType(out.toArray(new StructField[0]));
    int[] values = valueOrds.stream().mapToInt(Integer::intValue).toArray();
    UTF8String[] classText = classes.stream().map(UTF8String::fromString).toArray(UTF8String[]::new);
    UTF8String[] fateText = fates.stream().map(UTF8String::fromString).toArray(UTF8String[]::new);
    UTF8String lateText = lateFate == null ? null : UTF8String.fromString(lateFate);
    Long before = hasStreamTime ? streamTimeBefore : null;
    Long grace = hasGrace ? graceMs : null;
    // Tagged and brought into one partition at the RDD level: no Dataset calls (each is an
    // analysis on the driver), no shuffle (a coalesce).
    JavaRDD<Tagged> rows = tagged(s, false);
    if (buffer != null) rows = rows.union(tagged((org.apache.spark.sql.classic.Dataset<Row>) buffer, true));
    RDD<InternalRow> rdd = rows.coalesce(1).mapPartitions((Iterator<Tagged> it) -> {
      List<Tagged> batch = new ArrayList<>();
      while (it.hasNext()) batch.add(it.next());
      Batch b = new Batch(batch, tsOrd, tsCode, seqOrd, seqCode, keyOrd, values, nullTsMarker);
      b.decide(grace, inner, before);
      return b.rows(types, classText, fateText, lateText, stamped, batchId).iterator();
    }).rdd();
    return s.sparkSession().internalCreateDataFrame(rdd, outSchema, false);
  }

  /** The fields of both sides (the same names and types), nullable where either is. */
  private static StructField[] sameColumns(StructField[] fresh, StructField[] buffered) {
    boolean same = fresh.length == buffered.length;
    for (int i = 0; same && i < fresh.length; i++) {
      same = fresh[i].name().equals(buffered[i].name()) && fresh[i].dataType().equals(buffered[i].dataType());
    }
    if (!same) {
      throw new IllegalArgumentException("the buffer's columns " + new StructType(buffered).simpleString()
          + " are not the new records' " + new StructType(fresh).simpleString());
    }
    StructField[] out = new StructField[fresh.length];
    for (int i = 0; i < fresh.length; i++) {
      out[i] = fresh[i].nullable() || !buffered[i].nullable() ? fresh[i] : buffered[i];
    }
    return out;
  }

  /** A row (a copy: the scan reuses its buffers) and whether it was buffered before the batch. */
  record Tagged(InternalRow row, boolean buffered) implements java.io.Serializable {}

  private static JavaRDD<Tagged> tagged(org.apache.spark.sql.classic.Dataset<Row> frame, boolean buffered) {
    return frame.queryExecution().toRdd().toJavaRDD().map(r -> new Tagged(r.copy(), buffered));
  }

  /** One task's rows and their decision, in arrays indexed by the row's place. */
  static final class Batch {
    final List<InternalRow> rows;
    final int n;
    final long[] ts;
    final boolean[] tsNull;
    final long[] seq;
    final boolean[] buffered;
    final boolean[] keyNull;
    final boolean[] valueNull;
    final int[] cls;       // -1: none (a buffered row)
    final Long[] pBefore;
    final int[] fate;      // -1: none, else JOIN_FATE, KEEP_FATE or LATE_FATE
    final long[] emit;
    final boolean[] late;
    private final String nullTsMarker;

    Batch(List<Tagged> tagged, int tsOrd, int tsCode, int seqOrd, int seqCode, int keyOrd,
          int[] valueOrds, String nullTsMarker) {
      n = tagged.size();
      rows = new ArrayList<>(n);
      ts = new long[n];
      tsNull = new boolean[n];
      seq = new long[n];
      buffered = new boolean[n];
      keyNull = new boolean[n];
      valueNull = new boolean[n];
      cls = new int[n];
      pBefore = new Long[n];
      fate = new int[n];
      emit = new long[n];
      late = new boolean[n];
      for (int r = 0; r < n; r++) {
        InternalRow row = tagged.get(r).row();
        rows.add(row);
        if (row.isNullAt(seqOrd)) {
          throw new IllegalArgumentException("a stream record has a null arrival seq (column " + seqOrd + ")");
        }
        seq[r] = Columns.read(row, seqOrd, seqCode);
        tsNull[r] = row.isNullAt(tsOrd);
        ts[r] = tsNull[r] ? 0 : Columns.read(row, tsOrd, tsCode);
        buffered[r] = tagged.get(r).buffered();
        keyNull[r] = row.isNullAt(keyOrd);
        boolean allNull = valueOrds.length > 0;
        for (int v : valueOrds) allNull &= row.isNullAt(v);
        valueNull[r] = allNull;
        cls[r] = -1;
        fate[r] = -1;
        emit[r] = seq[r];
      }
      this.nullTsMarker = nullTsMarker;
    }

    void decide(Long grace, boolean inner, Long before) {
      // The buffer of KIP-923 ordered by (ts, arrival): (ts, seq) is unique per record.
      PriorityQueue<Integer> heap = new PriorityQueue<>((a, b) ->
          ts[a] != ts[b] ? Long.compare(ts[a], ts[b]) : Long.compare(seq[a], seq[b]));
      Long bufferTime = before;  // the buffer's stream time (a put moves it)
      if (grace != null) {
        for (int r = 0; r < n; r++) {
          if (buffered[r]) {
            heap.add(r);
            bufferTime = bufferTime == null ? ts[r] : Math.max(bufferTime, ts[r]);
            fate[r] = KEEP_FATE;
          }
        }
      }
      for (int r = 0; r < n; r++) {
        if (tsNull[r] && !(valueNull[r] || (inner && keyNull[r]))) {
          // Stream time and lateness are undefined without a ts: the step names the record.
          throw new IllegalArgumentException(nullTsMarker + seq[r] + " (a stream record has no ts)");
        }
      }
      Integer[] arrivals = new Integer[n];
      int m = 0;
      for (int r = 0; r < n; r++) if (!buffered[r]) arrivals[m++] = r;
      Arrays.sort(arrivals, 0, m, (a, b) -> Long.compare(seq[a], seq[b]));
      Long streamTime = before;
      for (int i = 0; i < m; i++) {
        int r = arrivals[i];
        pBefore[r] = streamTime;
        if (valueNull[r]) {
          cls[r] = SKIPPED_NULL_VALUE;
        } else if (inner && keyNull[r]) {
          cls[r] = SKIPPED_NULL_KEY;
        } else if (grace == null) {
          cls[r] = JOINED;
          fate[r] = JOIN_FATE;
          streamTime = streamTime == null ? ts[r] : Math.max(streamTime, ts[r]);
        } else if (bufferTime != null && ts[r] < bufferTime - grace) {
          cls[r] = LATE;
          fate[r] = LATE_FATE;
          late[r] = true;
        } else {
          cls[r] = PUT;
          fate[r] = KEEP_FATE;
          heap.add(r);
          bufferTime = bufferTime == null ? ts[r] : Math.max(bufferTime, ts[r]);
          streamTime = bufferTime;
          long bound = bufferTime - grace;
          while (!heap.isEmpty() && ts[heap.peek()] <= bound) {
            int evicted = heap.poll();
            fate[evicted] = JOIN_FATE;
            emit[evicted] = seq[r];
          }
        }
      }
    }

    List<InternalRow> rows(DataType[] types, UTF8String[] classText, UTF8String[] fateText,
                           UTF8String lateText, boolean stamped, long batchId) {
      int width = types.length + (stamped ? 6 : 5);
      List<InternalRow> out = new ArrayList<>(n);
      for (int r = 0; r < n; r++) {
        InternalRow row = rows.get(r);
        Object[] v = new Object[width];
        int c = 0;
        for (int i = 0; i < types.length; i++) v[c++] = row.isNullAt(i) ? null : row.get(i, types[i]);
        v[c++] = cls[r] < 0 ? null : classText[cls[r]];
        v[c++] = pBefore[r];
        v[c++] = fate[r] < 0 ? null : fate[r] == LATE_FATE ? lateText : fateText[fate[r]];
        v[c++] = emit[r];
        v[c++] = late[r];
        if (stamped) v[c] = batchId;
        out.add(new GenericInternalRow(v));
      }
      return Collections.unmodifiableList(out);
    }
  }
}
