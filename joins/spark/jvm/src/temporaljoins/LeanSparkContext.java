package temporaljoins;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.SparkException;
import scala.reflect.ClassTag$;

/**
 * A SparkContext that cleans each kind of lambda closure once, not on every call.
 *
 * <p>Why: Spark cleans every function it is given ({@code RDD.map}, {@code mapPartitions}, every
 * {@code runJob}). For a Java or Scala lambda, which is all Spark and delta-spark pass in
 * Spark 4, cleaning changes nothing unless the lambda was declared in a Scala or Ammonite REPL;
 * but first it reads the class file that declared the lambda (RDD, SparkContext, Delta's file
 * writer) and walks the bytecode of every method in it, looking for a {@code return} statement
 * in the lambda's body. A micro-batch of a few rows makes some forty such calls on the driver:
 * about 6 % of the session JVM's CPU in single-record replays of three operators, on the thread
 * that answers the Python driver (JFR samples: docs/testing.md).
 *
 * <p>That scan depends only on the lambda's class, so a class Spark cleaned without replacing the
 * function is skipped from then on. The serializability check is kept for every call (it depends
 * on what an instance captures), so a function that cannot be sent to the executors fails here as
 * before. Anything else (a closure of an anonymous class, whose cleaning nulls unused fields of
 * each instance; a REPL's lambda) goes to Spark's cleaner every time. Built by
 * joins/spark/session.py for classic sessions; {@code TJ_SPARK_CONTEXT=spark} builds Spark's own.
 */
public class LeanSparkContext extends SparkContext {
  private final Set<Class<?>> cleanLambdas = ConcurrentHashMap.newKeySet();
  private final LongAdder skipped = new LongAdder();
  private volatile boolean once = true;

  public LeanSparkContext(SparkConf conf) {
    super(conf);
  }

  @Override
  public <F> F clean(F f, boolean checkSerializable) {
    if (once && f != null && cleanLambdas.contains(f.getClass())) {
      if (checkSerializable) {
        ensureSerializable(f);
      }
      skipped.increment();
      return f;
    }
    F out = super.clean(f, checkSerializable);
    if (out == f && f != null && plainLambda(f.getClass())) {
      cleanLambdas.add(f.getClass());
    }
    return out;
  }

  /** Whether lambdas are cleaned once (the default) or, as Spark does, on every call: for
   * measuring the difference in one process. */
  public void cleanOnce(boolean once) {
    this.once = once;
  }

  /** How many lambda classes were cleaned once (tests). */
  public int cleanLambdaClasses() {
    return cleanLambdas.size();
  }

  /** How many calls found their lambda's class cleaned already (tests). */
  public long cleanSkipped() {
    return skipped.sum();
  }

  /** A lambda's class declared outside a Scala or Ammonite REPL. */
  static boolean plainLambda(Class<?> cls) {
    String name = cls.getName();
    return cls.isSynthetic() && name.contains("$$Lambda")
        && !name.startsWith("$line") && !name.startsWith("ammonite.");
  }

  /** Spark's own check (SparkClosureCleaner.clean): the function serializes as a task would. */
  private static void ensureSerializable(Object f) {
    SparkEnv env = SparkEnv.get();
    if (env == null) {
      return;
    }
    try {
      env.closureSerializer().newInstance().serialize(f, ClassTag$.MODULE$.AnyRef());
    } catch (Exception e) {
      throw LeanSparkContext.<RuntimeException>unchecked(new SparkException("Task not serializable", e));
    }
  }

  /** Throws a checked exception unchecked, as Scala code (Spark's cleaner) does. */
  @SuppressWarnings("unchecked")
  private static <T extends Throwable> T unchecked(Throwable t) throws T {
    throw (T) t;
  }
}
