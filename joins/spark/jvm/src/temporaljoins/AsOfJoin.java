package temporaljoins;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.EqualNullSafe;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

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
    Versions versions = new Versions(t.sparkSession(), t.schema(), keyOrd, tsOrd, tombOrd, valueOrds, valueNames,
        Collections.emptyList(), nullTs, duplicate, keyCheckField);
    return versions.broadcast(versions.collect(table), hasRetention, retention, hasStreamTime, streamTime);
  }

  /**
   * The join: each stream row looks up the version of key keyOrd at ts tsOrd (integer or
   * timestamp columns, as the table's; a null key matches nothing, a null ts fails naming the
   * field, nullTs a {@link RecordMessage} template). Output: every stream column, then the index's value columns (null where no version
   * answers; rows without an answer are dropped unless left).
   */
  public static Dataset<Row> probe(Dataset<Row> stream, int keyOrd, int tsOrd, Broadcast<VersionIndex> index,
                                   boolean left, List<String> nullTs, int keyCheckOrd, int keyCheckField) {
    return probeWith(stream, keyOrd, tsOrd, index.value().valueSchema(), () -> Lookup.of(index.value()), left,
        nullTs, keyCheckOrd, keyCheckField);
  }

  /**
   * {@link #probe} through a held history ({@link IndexCache#index}): its base and delta layers,
   * with this batch's retention bound.
   */
  public static Dataset<Row> probeHeld(Dataset<Row> stream, int keyOrd, int tsOrd, IndexCache.Held held,
                                       boolean left, List<String> nullTs, int keyCheckOrd, int keyCheckField) {
    Broadcast<VersionIndex> base = held.base;
    Broadcast<VersionIndex> delta = held.delta;
    boolean hasBound = held.hasBound;
    long bound = held.bound;
    return probeWith(stream, keyOrd, tsOrd, base.value().valueSchema(),
        () -> new Lookup(base.value(), delta == null ? null : delta.value(), hasBound, bound), left, nullTs,
        keyCheckOrd, keyCheckField);
  }

  /** Builds a task's Lookup from broadcasts, in the task. */
  interface LookupSource extends java.io.Serializable {
    Lookup get();
  }

  private static Dataset<Row> probeWith(Dataset<Row> stream, int keyOrd, int tsOrd, StructType valueSchema,
                                        LookupSource lookup, boolean left, List<String> nullTs, int keyCheckOrd,
                                        int keyCheckField) {
    org.apache.spark.sql.classic.Dataset<Row> s = (org.apache.spark.sql.classic.Dataset<Row>) stream;
    Probe probe = new Probe(s, keyOrd, tsOrd, left, nullTs, keyCheckOrd, keyCheckField);
    RDD<InternalRow> rdd = s.queryExecution().toRdd().toJavaRDD().mapPartitions((Iterator<InternalRow> rows) ->
        (Iterator<InternalRow>) probe.over(rows, lookup.get())).rdd();
    return s.sparkSession().internalCreateDataFrame(rdd, probe.outSchema(valueSchema), false);
  }

  /** How a task probes its stream rows: where the key and ts are, and what a bad row fails with. */
  static final class Probe implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    private final StructField[] streamFields;
    final int keyOrd;
    final int keyCode;
    final int tsOrd;
    final int tsCode;
    final boolean left;
    final RecordMessage nullTs;
    final ValueText keyText;  // names a record by its key
    final Expression keyCheck;  // null unless keys are hashed: stream key <=> the version's key

    Probe(org.apache.spark.sql.classic.Dataset<Row> stream, int keyOrd, int tsOrd, boolean left, List<String> nullTs,
          int keyCheckOrd, int keyCheckField) {
      streamFields = stream.schema().fields();
      // A hashed key is named by the key itself (keyCheckOrd), not by its hash.
      int keyTextOrd = keyCheckOrd < 0 ? keyOrd : keyCheckOrd;
      keyText = new ValueText(keyTextOrd, streamFields[keyTextOrd].dataType(),
          stream.sparkSession().sessionState().conf().sessionLocalTimeZone());
      this.nullTs = new RecordMessage(nullTs);
      this.keyOrd = keyOrd;
      this.tsOrd = tsOrd;
      this.left = left;
      keyCode = Columns.code(streamFields[keyOrd].dataType(), "the stream key");
      tsCode = Columns.code(streamFields[tsOrd].dataType(), "the stream ts");
      keyCheck = keyCheck(streamFields, keyCheckOrd, keyCheckField);
    }

    /** Every stream column, then the index's value columns. */
    StructType outSchema(StructType valueSchema) {
      List<StructField> out = new ArrayList<>(Arrays.asList(streamFields));
      out.addAll(Arrays.asList(valueSchema.fields()));
      return new StructType(out.toArray(new StructField[0]));
    }

    /**
     * The rows handed on are (stream row ++ value row) views; the scan over the output RDD copies
     * each into an UnsafeRow before the next one is asked for, so no projection is needed here.
     */
    BatchProbe over(Iterator<InternalRow> rows, Lookup lookup) {
      return new BatchProbe(rows, lookup, this);
    }
  }

  /** The probe's check that a hashed key's answer is for the key itself: stream key <=> value key. */
  static Expression keyCheck(StructField[] streamFields, int keyCheckOrd, int keyCheckField) {
    if (keyCheckOrd < 0) return null;
    DataType type = streamFields[keyCheckOrd].dataType();
    return new EqualNullSafe(new BoundReference(keyCheckOrd, type, true),
        new BoundReference(streamFields.length + keyCheckField, type, true));
  }

  static long saturatingSubtract(long a, long b) {
    long d = a - b;
    // Overflow iff a and b have different signs and d's sign differs from a's.
    if (((a ^ b) & (a ^ d)) < 0) return a < 0 ? Long.MIN_VALUE : Long.MAX_VALUE;
    return d;
  }
}
