package temporaljoins;

import org.apache.spark.sql.catalyst.expressions.UnsafeRow;

/**
 * What a probe asks: get(key, t) over one {@link VersionIndex}, or over two layers of one table's
 * versions, a large base and the small delta of versions gained since the base was built.
 *
 * <p>Why layers: a held history ({@link IndexCache}) gains a few versions per micro-batch. Merged
 * into one index, every batch would copy and broadcast the whole history again, a cost that grows
 * with the table; layered, the base is broadcast once and a batch ships only its delta, as an
 * LSM store writes a small run and merges runs now and then.
 *
 * <p>The answer is the one index of both layers would give: the version with the largest ts <= t
 * of either layer (a (key, ts) in both is answered by the delta's: {@link Runs#shadowed} has
 * already dropped every delta version the base's put of the same (key, ts) outranks); a
 * tombstone answers nothing; past history retention (t < bound) only the key's latest version,
 * over both layers, answers.
 */
final class Lookup {
  private final VersionIndex base;
  private final VersionIndex delta;  // null: one layer
  private final int split;           // positions >= split are the delta's
  private final boolean hasBound;
  private final long bound;

  Lookup(VersionIndex base, VersionIndex delta, boolean hasBound, long bound) {
    this.base = base;
    this.delta = delta;
    this.split = base.size();
    this.hasBound = hasBound;
    this.bound = bound;
  }

  /** One index, with its own retention bound. */
  static Lookup of(VersionIndex index) {
    return new Lookup(index, null, index.hasBound(), index.bound());
  }

  long range(long key) {
    return base.range(key);
  }

  long deltaRange(long key) {
    return delta == null ? -1 : delta.range(key);
  }

  /** Reads the ends of the key's ranges in both layers (see {@link VersionIndex#touchTs}). */
  long touchTs(long range, long deltaRange) {
    return base.touchTs(range) ^ (delta == null ? 0 : delta.touchTs(deltaRange));
  }

  /**
   * The position of the version that get(key, t) finds, given the key's ranges in both layers, or
   * -1: the latest at or before t, unless history retention has expired it. It answers unless it
   * is a tombstone, which {@link #answers} says: a separate step, so that a batch's tombstone
   * reads, each a likely cache miss, are independent of one another instead of each waiting for
   * its row's search.
   */
  int search(long range, long deltaRange, long t) {
    int b = base.floor(range, t);
    int d = delta == null ? -1 : delta.floor(deltaRange, t);
    if (b < 0 && d < 0) return -1;
    boolean fromDelta = d >= 0 && (b < 0 || delta.ts(d) >= base.ts(b));
    int p = fromDelta ? d : b;
    if (hasBound && t < bound && !latest(p, fromDelta, range, deltaRange)) return -1;
    return fromDelta ? split + p : p;
  }

  /**
   * Whether the chosen version (p of the delta, or of the base) is the key's latest in both
   * layers. A ts in both layers is one (key, ts), which the delta answers: a delta version is
   * latest when the base's last is not later, a base version only when the delta's last is earlier.
   */
  private boolean latest(int p, boolean fromDelta, long range, long deltaRange) {
    if (fromDelta) {
      return p == (int) deltaRange - 1 && (range < 0 || base.ts((int) range - 1) <= delta.ts(p));
    }
    return p == (int) range - 1 && (deltaRange < 0 || delta.ts((int) deltaRange - 1) < base.ts(p));
  }

  /** Whether the version at p (from {@link #search}) answers: it is not a tombstone. */
  boolean answers(int p) {
    return p < split ? !base.tombstone(p) : !delta.tombstone(p - split);
  }

  int touch(int p) {
    return p < split ? base.touch(p) : delta.touch(p - split);
  }

  void pointTo(UnsafeRow row, int p) {
    if (p < split) base.pointTo(row, p); else delta.pointTo(row, p - split);
  }

  int valueFields() {
    return base.valueFields();
  }
}
