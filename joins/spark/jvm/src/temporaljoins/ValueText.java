package temporaljoins;

import java.io.Serializable;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StringType$;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import scala.Option;

/**
 * A column of a row as Spark SQL's CAST(... AS STRING) prints it (a string key as itself, a
 * struct as {a, b}, a timestamp in the session time zone): how an error names a record's key and
 * ts, the same text the SQL plans put into theirs. Only used on the way to an error.
 */
final class ValueText implements Serializable {
  private static final long serialVersionUID = 1L;

  private final int ordinal;
  private final DataType type;
  private final String timeZone;
  private transient Expression cast;

  ValueText(int ordinal, DataType type, String timeZone) {
    this.ordinal = ordinal;
    this.type = type;
    this.timeZone = timeZone;
  }

  /** The value at the ordinal, or null where it is null. */
  String of(InternalRow row) {
    if (row.isNullAt(ordinal)) return null;
    if (cast == null) cast = toText(new BoundReference(ordinal, type, true), timeZone);
    return String.valueOf(cast.eval(row));
  }

  /** A ts in its long form (an integer, or a timestamp's microseconds) as its type prints it. */
  static String ts(long value, DataType type, String timeZone) {
    if (!(type instanceof TimestampType) && !(type instanceof TimestampNTZType)) return Long.toString(value);
    return String.valueOf(toText(new Literal(value, type), timeZone).eval(null));
  }

  private static Expression toText(Expression child, String timeZone) {
    return new Cast(child, StringType$.MODULE$, Option.apply(timeZone));
  }
}
