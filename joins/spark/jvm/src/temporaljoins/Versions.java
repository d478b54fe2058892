package temporaljoins;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BasePredicate;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.EqualNullSafe;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.sql.catalyst.expressions.Predicate;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * A table's versions as the index reads them (which columns are the key, ts, tombstone, values and
 * sequence), gathered by one Spark job into one sorted {@link Runs.Run} and turned into a broadcast
 * {@link VersionIndex}. Frames of one schema share a layout: the history a {@link IndexCache}
 * holds and the rows a later batch adds to it. Serializable so that a task can pack and merge a
 * partition's versions itself ({@link ShuffledAsOf}).
 */
final class Versions implements java.io.Serializable {
  private static final long serialVersionUID = 1L;
  private final transient org.apache.spark.SparkContext sparkContext;
  final Runs.Layout layout;
  final StructType valueSchema;
  final DataType[] valueTypes;
  final int keyCheckField;
  final RecordMessage duplicate;
  final DataType tsType;
  final String timeZone;

  Versions(org.apache.spark.sql.classic.SparkSession session, StructType schema, int keyOrd, int tsOrd, int tombOrd,
           List<Integer> valueOrds, List<String> valueNames, List<Integer> seqOrds, List<String> nullTs,
           List<String> duplicate, int keyCheckField) {
    StructField[] fields = schema.fields();
    sparkContext = session.sparkContext();
    timeZone = session.sessionState().conf().sessionLocalTimeZone();
    int[] ords = valueOrds.stream().mapToInt(Integer::intValue).toArray();
    StructField[] valueFields = new StructField[ords.length];
    valueTypes = new DataType[ords.length];
    for (int i = 0; i < ords.length; i++) {
      StructField f = fields[ords[i]];
      valueFields[i] = new StructField(valueNames.get(i), f.dataType(), true, f.metadata());
      valueTypes[i] = f.dataType();
    }
    valueSchema = new StructType(valueFields);
    int[] seq = seqOrds.stream().mapToInt(Integer::intValue).toArray();
    int[] seqCodes = new int[seq.length];
    for (int i = 0; i < seq.length; i++) seqCodes[i] = Columns.code(fields[seq[i]].dataType(), "a sequence column");
    // A hashed key is named by the key itself: the table's key column, a version's key copy.
    int keyTextOrd = keyCheckField < 0 ? keyOrd : ords[keyCheckField];
    layout = new Runs.Layout(keyOrd, Columns.code(fields[keyOrd].dataType(), "the table key"), tsOrd,
        Columns.code(fields[tsOrd].dataType(), "the table ts"), tombOrd, ords, valueTypes, seq, seqCodes,
        new RecordMessage(nullTs), new ValueText(keyTextOrd, fields[keyTextOrd].dataType(), timeZone));
    this.keyCheckField = keyCheckField;
    this.duplicate = new RecordMessage(duplicate);
    this.tsType = fields[tsOrd].dataType();
  }

  /**
   * The frame's versions (one Spark job: each task packs and sorts its partition; none when frame
   * is null), merged on the driver with the runs held (null ones skipped), as Spark's own
   * broadcast joins build their relation there.
   */
  Runs.Run collect(Dataset<Row> frame, Runs.Run... held) {
    List<Runs.Run> runs = new ArrayList<>();
    for (Runs.Run r : held) {
      if (r != null) runs.add(r);
    }
    if (frame != null) {
      org.apache.spark.sql.classic.Dataset<Row> t = (org.apache.spark.sql.classic.Dataset<Row>) frame;
      Runs.Layout l = layout;
      runs.addAll(t.queryExecution().toRdd().toJavaRDD()
          .mapPartitions((Iterator<InternalRow> rows) -> Collections.singletonList(Runs.pack(rows, l)).iterator())
          .collect());
    }
    return merge(runs);
  }

  /**
   * Sorted runs merged into one, each (key, ts) once: a duplicate without a sequence to order it
   * fails naming the record, and a hashed key shared by two keys fails with HASH_COLLISION.
   */
  Runs.Run merge(List<Runs.Run> runs) {
    Runs.Run all = Runs.merge(runs, new Runs.Duplicate() {
      @Override
      public RuntimeException collision(Runs.Run merged, int i, Runs.Run other, int j) {
        if (keyCheckField < 0) return null;
        // Equal hashes and equal ts: the same key twice, or two keys sharing a hash.
        boolean same = sameKey().eval(new JoinedRow(Runs.pointTo(new UnsafeRow(valueTypes.length), merged, i),
            Runs.pointTo(new UnsafeRow(valueTypes.length), other, j)));
        return same ? null : Versions.collision(merged.keys[i]);
      }

      @Override
      public RuntimeException twice(Runs.Run merged, int i) {
        String key = Long.toString(merged.keys[i]);
        if (keyCheckField >= 0) {
          key = new ValueText(keyCheckField, valueTypes[keyCheckField], timeZone)
              .of(Runs.pointTo(new UnsafeRow(valueTypes.length), merged, i));
        }
        return new IllegalArgumentException(duplicate.fill(key, ValueText.ts(merged.ts[i], tsType, timeZone)));
      }
    });
    if (keyCheckField >= 0) checkNoCollision(all);
    return all;
  }

  /** The index of `all` for one batch: the retention bound is the stream time's (else the largest ts's). */
  Broadcast<VersionIndex> broadcast(Runs.Run all, boolean hasRetention, long retention, boolean hasStreamTime,
                                    long streamTime) {
    return ship(all, hasRetention && all.n > 0, bound(retention, hasStreamTime, streamTime, maxTs(all)));
  }

  /** The index of a held layer: its retention bound is the batch's, applied by {@link Lookup}. */
  Broadcast<VersionIndex> layer(Runs.Run run) {
    return ship(run, false, 0);
  }

  private Broadcast<VersionIndex> ship(Runs.Run run, boolean hasBound, long bound) {
    return JavaSparkContext.fromSparkContext(sparkContext).broadcast(index(run, hasBound, bound));
  }

  VersionIndex index(Runs.Run run, boolean hasBound, long bound) {
    return new VersionIndex(run.keys, run.ts, run.tombstone, run.values, run.offsets, valueSchema, hasBound,
        bound);
  }

  /** History retention's bound: lookups below it are answered by a key's latest version only. */
  static long bound(long retention, boolean hasStreamTime, long streamTime, long maxTs) {
    return AsOfJoin.saturatingSubtract(hasStreamTime ? streamTime : maxTs, retention);
  }

  static long maxTs(Runs.Run run) {
    long max = Long.MIN_VALUE;
    for (int i = 0; i < run.n; i++) max = Math.max(max, run.ts[i]);
    return max;
  }

  /**
   * delta without the versions that base's put of the same (key, ts) outranks (the later sequence
   * wins, as in a merge), so that a probe of both layers may let the delta answer every tie. A
   * hashed key in both layers must be the same key in both (else HASH_COLLISION).
   */
  Runs.Run shadowed(Runs.Run delta, Runs.Run base) {
    boolean[] drop = new boolean[delta.n];
    int dropped = 0;
    UnsafeRow mine = new UnsafeRow(valueTypes.length);
    UnsafeRow theirs = new UnsafeRow(valueTypes.length);
    BasePredicate same = keyCheckField < 0 ? null : sameKey();
    JoinedRow pair = new JoinedRow();
    boolean inBase = false;
    for (int i = 0; i < delta.n; i++) {
      long key = delta.keys[i];
      if (i == 0 || delta.keys[i - 1] != key) {
        // Each layer already holds one key per hash (checkNoCollision): its first version tells.
        int first = Runs.lowerBound(base, key, Long.MIN_VALUE);
        inBase = first < base.n && base.keys[first] == key;
        if (inBase && same != null && !same.eval(pair.apply(Runs.pointTo(mine, delta, i),
                                                             Runs.pointTo(theirs, base, first)))) {
          throw collision(key);
        }
      }
      if (!inBase) continue;
      int twin = Runs.lowerBound(base, key, delta.ts[i]);
      if (twin < base.n && base.keys[twin] == key && base.ts[twin] == delta.ts[i]
          && Runs.compareSeq(base.seq, twin * base.width, delta.seq, i * delta.width, delta.width) > 0) {
        drop[i] = true;
        dropped++;
      }
    }
    return dropped == 0 ? delta : Runs.without(delta, drop, dropped);
  }

  /** Versions sharing a hashed key must share the key itself. */
  private void checkNoCollision(Runs.Run all) {
    BasePredicate same = sameKey();
    UnsafeRow first = new UnsafeRow(valueTypes.length);
    UnsafeRow other = new UnsafeRow(valueTypes.length);
    JoinedRow pair = new JoinedRow();
    int start = 0;
    for (int i = 1; i < all.n; i++) {
      if (all.keys[i] != all.keys[start]) {
        start = i;
        continue;
      }
      if (!same.eval(pair.apply(Runs.pointTo(first, all, start), Runs.pointTo(other, all, i)))) {
        throw collision(all.keys[i]);
      }
    }
  }

  /** (version ++ version) -> whether both carry the same key (null-safe, as the probe compares). */
  private BasePredicate sameKey() {
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
}
