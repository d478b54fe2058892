package temporaljoins;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.api.java.UDF0;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

/**
 * A per-batch constant that is not written into generated code.
 *
 * <p>Whole-stage code generation writes a literal long into the Java source of a stage, so a
 * stage whose plan holds a value that changes every micro-batch (a bound computed from stream
 * time) is compiled anew every batch (Janino, about 25 ms each on this machine, on the driver,
 * measured). A value returned by a function is passed to the generated code by reference
 * instead: the code, and its compiled class, is the same from batch to batch. The optimizer does
 * not fold it back into a literal (a user function is never foldable), as it does a DECIMAL
 * literal cast to BIGINT.
 */
public final class Constant {
  private Constant() {}

  /** A BIGINT column of value, never null. */
  public static Column bigint(long value) {
    UserDefinedFunction f = functions.udf((UDF0<Long>) () -> value, DataTypes.LongType).asNonNullable();
    return f.apply();
  }
}
