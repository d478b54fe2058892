package temporaljoins;

import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.StructType;

/**
 * A versioned table's history kept in the driver from one micro-batch to the next, as a Kafka
 * Streams task keeps its versioned store next to the changelog it can be rebuilt from: a batch
 * reads only the versions the table gained since the last one and merges them in, instead of
 * reading the table's history again.
 *
 * <p>The Delta table stays the truth. An entry is the table (its Delta table id: a table created
 * anew at the same path is another table) at one version; it is used only by a batch that starts
 * exactly there, and a batch that cannot (a first batch, another process's batch, a table rewritten
 * by a compaction) builds from the table instead (all of it, or a window of it: see {@link #index}).
 * An entry is two layers (see {@link Lookup}): a base, broadcast once, and the delta gained since,
 * broadcast per batch and merged into a new base when it outgrows an eighth of it. Only histories
 * of at most maxRows versions and maxBytes bytes of values are kept, so that the driver's memory
 * stays bounded, and all holders together keep at most TOTAL_MAX_ROWS: a process running many joins
 * (a Dagster run worker) lets the least recently used ones go (their next batch reads the table
 * again).
 */
public final class IndexCache {
  private IndexCache() {}

  /** Versions held by all holders together; the least recently used holders give way above it. */
  static final long TOTAL_MAX_ROWS = 4_000_000L;

  /**
   * A delta of up to this many versions (or an eighth of the base, if more) is shipped beside the
   * base; a larger one is merged into a new base. Each batch pays for its delta, every so many
   * batches one merge and broadcast of the whole history.
   */
  static final int REBASE_MIN_ROWS = 1 << 16;

  private static long totalMaxRows = TOTAL_MAX_ROWS;
  private static volatile int rebaseMinRows = REBASE_MIN_ROWS;

  /** What one batch probes: the held layers and the batch's retention bound (see {@link Lookup}). */
  public static final class Held {
    final Broadcast<VersionIndex> base;
    final Broadcast<VersionIndex> delta;  // null: no versions since the base
    final boolean hasBound;
    final long bound;
    final long windowFrom;
    final boolean kept;

    Held(Broadcast<VersionIndex> base, Broadcast<VersionIndex> delta, boolean hasBound, long bound,
         long windowFrom, boolean kept) {
      this.base = base;
      this.delta = delta;
      this.hasBound = hasBound;
      this.bound = bound;
      this.windowFrom = windowFrom;
      this.kept = kept;
    }

    /** Whether the index is held for the next batch (else it outgrew maxRows or maxBytes). */
    public boolean kept() {
      return kept;
    }

    /** Lookups at ts >= this are answered; Long.MIN_VALUE when the whole history is held. */
    public long windowFrom() {
      return windowFrom;
    }

    /** Versions in both layers (for tests and monitoring). */
    public long rows() {
      return base.value().size() + (delta == null ? 0 : delta.value().size());
    }
  }

  private static final class Entry {
    final String tableId;
    final long version;
    final long windowFrom;
    final Runs.Run base;
    final Broadcast<VersionIndex> baseIndex;
    final Runs.Run delta;                   // null: none
    final Broadcast<VersionIndex> deltaIndex;
    final long maxTs;
    final long used;

    Entry(String tableId, long version, long windowFrom, Runs.Run base, Broadcast<VersionIndex> baseIndex,
          Runs.Run delta, Broadcast<VersionIndex> deltaIndex, long maxTs, long used) {
      this.tableId = tableId;
      this.version = version;
      this.windowFrom = windowFrom;
      this.base = base;
      this.baseIndex = baseIndex;
      this.delta = delta;
      this.deltaIndex = deltaIndex;
      this.maxTs = maxTs;
      this.used = used;
    }

    long rows() {
      return base.n + (delta == null ? 0 : delta.n);
    }

    long bytes() {
      return (long) base.offsets[base.n] + (delta == null ? 0 : delta.offsets[delta.n]);
    }
  }

  private static final ConcurrentHashMap<String, Entry> ENTRIES = new ConcurrentHashMap<>();
  private static long clock = 0;

  /** The table version held under key for the table tableId, or -1. */
  public static long version(String key, String tableId) {
    Entry e = ENTRIES.get(key);
    return e != null && e.tableId.equals(tableId) ? e.version : -1;
  }

  /** Drops what key holds (a test, or a caller that knows the table changed under it). */
  public static void forget(String key) {
    ENTRIES.remove(key);
  }

  /**
   * The index of the table tableId at version, whose frames have the given schema. When from >= 0,
   * frame holds the rows of versions from + 1 .. version (null when from == version: no Spark job)
   * and is merged into the history held at from, which must be held (else IllegalStateException
   * "INDEX_CACHE_MISS"); when from < 0, frame is the table at version: all of it (windowFrom =
   * Long.MIN_VALUE), or its window from windowFrom on (every version at or after windowFrom, and
   * per key the last one before it: enough for any lookup at ts >= windowFrom).
   * The result is held for the next batch when it has at most maxRows versions and maxBytes bytes of
   * values ({@link Held#kept} says whether it was). The layout
   * parameters are {@link AsOfJoin#index}'s, plus seqOrds: a (key, ts) put twice keeps the put
   * with the larger sequence.
   */
  public static Held index(SparkSession session, StructType schema, String key, String tableId, long version,
                           Dataset<Row> frame, long from, long windowFrom, long maxRows, long maxBytes, int keyOrd, int tsOrd,
                           int tombOrd, List<Integer> valueOrds, List<String> valueNames, List<Integer> seqOrds,
                           List<String> nullTs, List<String> duplicate, int keyCheckField, boolean hasRetention,
                           long retention, boolean hasStreamTime, long streamTime) {
    Versions versions = new Versions((org.apache.spark.sql.classic.SparkSession) session, schema, keyOrd,
        tsOrd, tombOrd, valueOrds, valueNames, seqOrds, nullTs, duplicate, keyCheckField);
    Entry entry;
    if (from >= 0) {
      Entry held = ENTRIES.get(key);
      if (held == null || !held.tableId.equals(tableId) || held.version != from) {
        throw new IllegalStateException("INDEX_CACHE_MISS: " + key + " does not hold version " + from);
      }
      // A batch that reads the version held (its table gained nothing) runs no Spark job.
      entry = from == version ? held : merged(versions, held, version, versions.collect(frame, held.delta));
    } else {
      Runs.Run base = versions.collect(frame);
      entry = new Entry(tableId, version, windowFrom, base, versions.layer(base), null, null, Versions.maxTs(base),
          tick());
    }
    boolean kept = entry.rows() <= maxRows && entry.bytes() <= maxBytes;
    if (kept) {
      hold(key, entry);
    } else {
      ENTRIES.remove(key);
    }
    return new Held(entry.baseIndex, entry.deltaIndex, hasRetention && entry.rows() > 0,
        Versions.bound(retention, hasStreamTime, streamTime, entry.maxTs), entry.windowFrom, kept);
  }

  /** held with delta (the held delta and the versions since, merged) as of version. */
  private static Entry merged(Versions versions, Entry held, long version, Runs.Run delta) {
    long maxTs = Math.max(held.maxTs, Versions.maxTs(delta));
    if (delta.n > Math.max(rebaseMinRows, held.base.n / 8)) {
      Runs.Run base = versions.collect(null, held.base, delta);
      return new Entry(held.tableId, version, held.windowFrom, base, versions.layer(base), null, null, maxTs,
          tick());
    }
    delta = versions.shadowed(delta, held.base);
    return new Entry(held.tableId, version, held.windowFrom, held.base, held.baseIndex, delta,
        delta.n == 0 ? null : versions.layer(delta), maxTs, tick());
  }

  private static synchronized long tick() {
    return ++clock;
  }

  /** Holds entry under key; the least recently used other holders go while all hold too much. */
  private static synchronized void hold(String key, Entry entry) {
    ENTRIES.put(key, entry);
    long total = 0;
    for (Entry e : ENTRIES.values()) total += e.rows();
    while (total > totalMaxRows) {
      String oldest = null;
      long oldestUse = Long.MAX_VALUE;
      for (java.util.Map.Entry<String, Entry> e : ENTRIES.entrySet()) {
        if (!e.getKey().equals(key) && e.getValue().used < oldestUse) {
          oldest = e.getKey();
          oldestUse = e.getValue().used;
        }
      }
      if (oldest == null) return;  // only this holder: its own bound (maxRows) applies
      total -= ENTRIES.remove(oldest).rows();
    }
  }

  /** Sets how many versions all holders together keep (TOTAL_MAX_ROWS by default); returns the old. */
  public static synchronized long limit(long rows) {
    long old = totalMaxRows;
    totalMaxRows = rows;
    return old;
  }

  /** Sets the delta size that is always shipped beside the base (REBASE_MIN_ROWS); returns the old. */
  public static synchronized int rebaseMinRows(int rows) {
    int old = rebaseMinRows;
    rebaseMinRows = rows;
    return old;
  }

  /** Versions held by all holders together (for tests and monitoring). */
  public static synchronized long heldRows() {
    long total = 0;
    for (Entry e : ENTRIES.values()) total += e.rows();
    return total;
  }
}
