package temporaljoins;

import java.io.Serializable;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;

/**
 * Reads an integer or timestamp column of a row as a long, in Spark's internal form (timestamps
 * are microseconds since the epoch), without a projection in front of the join.
 */
final class Columns implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final int LONG = 0;
  private static final int INT = 1;
  private static final int SHORT = 2;
  private static final int BYTE = 3;

  private Columns() {}

  /** The reader code of a column type; fails for a type the index cannot key or order on. */
  static int code(DataType type, String what) {
    if (type instanceof LongType || type instanceof TimestampType || type instanceof TimestampNTZType) {
      return LONG;
    }
    if (type instanceof IntegerType) return INT;
    if (type instanceof ShortType) return SHORT;
    if (type instanceof ByteType) return BYTE;
    throw new IllegalStateException(what + " must be an integer or a timestamp, got " + type.simpleString());
  }

  static long read(InternalRow row, int ordinal, int code) {
    switch (code) {
      case LONG:
        return row.getLong(ordinal);
      case INT:
        return row.getInt(ordinal);
      case SHORT:
        return row.getShort(ordinal);
      default:
        return row.getByte(ordinal);
    }
  }
}
