package temporaljoins;

import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;

/**
 * The as-of join's shuffle form, for a table too large to broadcast: both sides arrive
 * hash-partitioned on the key into the same partitions (joins/asof/index.py repartitions them), and
 * each task indexes its share of the table (a {@link VersionIndex} of its partition's keys) and
 * probes its share of the stream with it, as the broadcast form probes the whole index. No sort of
 * the stream and no join operator: one shuffle of each side, then the same binary searches.
 *
 * <p>What a task holds is a partition of the table, so a table of any size joins with enough
 * partitions; a hot key's versions all land in one task (its stream rows too), as in Spark's own
 * shuffled joins.
 */
public final class ShuffledAsOf {
  private ShuffledAsOf() {}

  /**
   * The join of stream and table, partitioned alike (an IllegalArgumentException otherwise).
   * Arguments as {@link AsOfJoin#index} (the table's) and {@link AsOfJoin#probe} (the stream's);
   * with retention and no stream time, the bound is the table's largest ts, found by one job now.
   */
  public static Dataset<Row> join(Dataset<Row> stream, int streamKeyOrd, int streamTsOrd, Dataset<Row> table,
                                  int keyOrd, int tsOrd, int tombOrd, List<Integer> valueOrds,
                                  List<String> valueNames, boolean hasRetention, long retention,
                                  boolean hasStreamTime, long streamTime, boolean left, List<String> streamNullTs,
                                  List<String> tableNullTs, List<String> duplicate, int keyCheckOrd,
                                  int keyCheckField) {
    org.apache.spark.sql.classic.Dataset<Row> s = (org.apache.spark.sql.classic.Dataset<Row>) stream;
    org.apache.spark.sql.classic.Dataset<Row> t = (org.apache.spark.sql.classic.Dataset<Row>) table;
    Versions versions = new Versions(t.sparkSession(), t.schema(), keyOrd, tsOrd, tombOrd, valueOrds, valueNames,
        Collections.emptyList(), tableNullTs, duplicate, keyCheckField);
    JavaRDD<InternalRow> tableRows = t.queryExecution().toRdd().toJavaRDD();
    JavaRDD<InternalRow> streamRows = s.queryExecution().toRdd().toJavaRDD();
    if (streamRows.getNumPartitions() != tableRows.getNumPartitions()) {
      throw new IllegalArgumentException("as-of shuffle: the stream has " + streamRows.getNumPartitions()
          + " partitions and the table " + tableRows.getNumPartitions() + "; both must be partitioned alike");
    }
    boolean hasBound = false;
    long bound = 0;
    if (hasRetention) {
      long maxTs = hasStreamTime ? 0 : maxTs(tableRows, versions.layout);
      // No version at all: nothing to bound (as the broadcast form, which bounds only a non-empty index).
      hasBound = hasStreamTime || maxTs != Long.MIN_VALUE;
      bound = Versions.bound(retention, hasStreamTime, streamTime, maxTs);
    }
    AsOfJoin.Probe probe = new AsOfJoin.Probe(s, streamKeyOrd, streamTsOrd, left, streamNullTs, keyCheckOrd,
        keyCheckField);
    boolean taskHasBound = hasBound;
    long taskBound = bound;
    JavaRDD<InternalRow> joined = streamRows.zipPartitions(tableRows,
        (FlatMapFunction2<Iterator<InternalRow>, Iterator<InternalRow>, InternalRow>) (mine, versionRows) -> {
          Runs.Run run = versions.merge(Collections.singletonList(Runs.pack(versionRows, versions.layout)));
          return probe.over(mine, Lookup.of(versions.index(run, taskHasBound, taskBound)));
        });
    return s.sparkSession().internalCreateDataFrame(joined.rdd(), probe.outSchema(versions.valueSchema), false);
  }

  /** The largest ts of the versions with a key (Long.MIN_VALUE when there is none): one job. */
  private static long maxTs(JavaRDD<InternalRow> rows, Runs.Layout layout) {
    List<Long> maxima = rows.mapPartitions((Iterator<InternalRow> it) -> {
      long max = Long.MIN_VALUE;
      while (it.hasNext()) {
        InternalRow r = it.next();
        // A null ts fails the join itself, naming the record; here it is only passed over.
        if (r.isNullAt(layout.keyOrd) || r.isNullAt(layout.tsOrd)) continue;
        max = Math.max(max, Columns.read(r, layout.tsOrd, layout.tsCode));
      }
      return Collections.singletonList(max).iterator();
    }).collect();
    long max = Long.MIN_VALUE;
    for (long m : maxima) max = Math.max(max, m);
    return max;
  }
}
