package temporaljoins;

import java.io.Serializable;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;

/**
 * A versioned table held in memory for as-of lookups: every version sorted by (key, ts), a map from
 * key to its run of versions, and each version's value columns as UnsafeRow bytes in one array.
 *
 * <p>floor(range(key), t) finds the version of the key with the largest ts <= t; {@link Lookup#search}
 * and {@link Lookup#answers} make it seed 000's versioned-store get: a tombstone answers nothing;
 * past history retention (t < bound) only the key's latest version answers (it never expires).
 *
 * <p>Keys that are dense integers (span at most 4x the number of keys) are addressed directly, as
 * Spark's dense hashed relation does; other keys go through an open-addressing hash. Everything is
 * primitive arrays: the index is broadcast by Java serialization and probed without allocation.
 */
public final class VersionIndex implements Serializable {
  private static final long serialVersionUID = 1L;

  private final int[] starts;  // dense: key k's versions are [starts[k - minKey], starts[k - minKey + 1])
  private final long minKey;
  private final long[] slots;  // hashed: [key, start << 32 | end] pairs; end == 0 marks an empty slot
  private final int mask;
  private final long[] ts;
  private final boolean[] tombstone;
  private final byte[] values;
  // Version i's value bytes: [i * width, (i + 1) * width) when all versions' bytes have one
  // width (as when every value column has a fixed width: numbers, times, flags), else
  // [valueOffsets[i], valueOffsets[i + 1]) and width is -1. Without the offsets a lookup saves a
  // dependent cache miss, and the broadcast 4 bytes a version.
  private final int[] valueOffsets;
  private final int width;
  private final StructType valueSchema;
  private final boolean hasBound;
  private final long bound;

  /** keys and ts sorted by (key, ts) with no (key, ts) twice; values/valueOffsets in that order. */
  VersionIndex(long[] keys, long[] ts, boolean[] tombstone, byte[] values, int[] valueOffsets,
               StructType valueSchema, boolean hasBound, long bound) {
    this.ts = ts;
    this.tombstone = tombstone;
    this.values = values;
    this.width = sameWidth(valueOffsets);
    this.valueOffsets = width >= 0 ? null : valueOffsets;
    this.valueSchema = valueSchema;
    this.hasBound = hasBound;
    this.bound = bound;
    int n = keys.length;
    int distinct = 0;
    for (int i = 0; i < n; i++) {
      if (i == 0 || keys[i] != keys[i - 1]) distinct++;
    }
    long lowest = n == 0 ? 0 : keys[0];
    // Wraps negative when the keys span more than Long.MAX_VALUE: then the hash is used.
    long span = n == 0 ? 0 : keys[n - 1] - lowest + 1;
    if (n > 0 && span > 0 && span <= 4L * distinct + 1024) {
      minKey = lowest;
      starts = new int[(int) span + 1];
      int i = 0;
      for (int o = 0; o <= span; o++) {
        while (i < n && keys[i] - lowest < o) i++;
        starts[o] = i;
      }
      slots = null;
      mask = 0;
      return;
    }
    starts = null;
    minKey = 0;
    int cap = Integer.highestOneBit(Math.max(4, distinct * 2 - 1)) << 1;
    slots = new long[2 * cap];
    mask = cap - 1;
    int i = 0;
    while (i < n) {
      int j = i + 1;
      while (j < n && keys[j] == keys[i]) j++;
      int s = slot(keys[i]);
      while ((int) slots[2 * s + 1] != 0) s = (s + 1) & mask;
      slots[2 * s] = keys[i];
      slots[2 * s + 1] = ((long) i << 32) | j;
      i = j;
    }
  }

  /** The one width of every version's value bytes, or -1 when they differ. */
  private static int sameWidth(int[] offsets) {
    if (offsets[0] != 0) return -1;
    int width = offsets.length < 2 ? 0 : offsets[1];
    for (int i = 1; i < offsets.length; i++) {
      if (offsets[i] - offsets[i - 1] != width) return -1;
    }
    return width;
  }

  private int slot(long key) {
    long h = key * 0x9E3779B97F4A7C15L;
    return (int) (h ^ (h >>> 29)) & mask;
  }

  /** The key's versions as (start << 32 | end), or -1 when the table does not hold the key. */
  long range(long key) {
    if (starts != null) {
      long o = key - minKey;  // wraps out of [0, span) for keys outside [minKey, maxKey]
      if (o < 0 || o >= starts.length - 1) return -1;
      int lo = starts[(int) o];
      int end = starts[(int) o + 1];
      return lo == end ? -1 : ((long) lo << 32) | end;
    }
    int s = slot(key);
    while (true) {
      long range = slots[2 * s + 1];
      if ((int) range == 0) return -1;
      if (slots[2 * s] == key) return range;
      s = (s + 1) & mask;
    }
  }

  /** The version of range(key) with the largest ts <= t, tombstone or not; -1 when none. */
  int floor(long range, long t) {
    if (range < 0) return -1;
    int lo = (int) (range >>> 32);
    int hi = (int) range - 1;
    if (ts[lo] > t) return -1;
    if (ts[hi] <= t) return hi;
    while (hi - lo > 1) {  // ts[lo] <= t < ts[hi]
      int mid = (lo + hi) >>> 1;
      if (ts[mid] <= t) lo = mid; else hi = mid;
    }
    return lo;
  }

  long ts(int p) {
    return ts[p];
  }

  boolean tombstone(int p) {
    return tombstone[p];
  }

  boolean hasBound() {
    return hasBound;
  }

  long bound() {
    return bound;
  }

  /**
   * Reads the first and the last ts of a range (0 when there is none), so that the search that
   * follows finds them in cache: a binary search's mispredicted branches would otherwise make its
   * first cache miss wait, row after row.
   */
  long touchTs(long range) {
    if (range < 0) return 0;
    return ts[(int) (range >>> 32)] ^ ts[(int) range - 1];
  }

  /**
   * Reads the first and the last byte of version p's values, so that they are in cache when
   * copied: a value row may straddle two cache lines (rows are not aligned to them).
   */
  int touch(int p) {
    int start = valueStart(p);
    int end = valueStart(p + 1);
    return start == end ? 0 : values[start] + values[end - 1];  // no value columns: no bytes
  }

  /** Points row at version p's value columns. */
  void pointTo(UnsafeRow row, int p) {
    int start = valueStart(p);
    row.pointTo(values, Platform.BYTE_ARRAY_OFFSET + start, valueStart(p + 1) - start);
  }

  /** Where version p's value bytes start (p == size(): where the last one's end). */
  private int valueStart(int p) {
    return width >= 0 ? p * width : valueOffsets[p];
  }

  public int valueFields() {
    return valueSchema.size();
  }

  /** The value columns' schema: the table's columns after key, ts and tombstone. */
  public StructType valueSchema() {
    return valueSchema;
  }

  public int size() {
    return ts.length;
  }
}
