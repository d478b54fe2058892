package temporaljoins;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;

/**
 * A SparkContext that cleans each kind of lambda closure once, not on every call.
 *
 * <p>Why: Spark cleans every function it is given ({@code RDD.map}, {@code mapPartitions}, every
 * {@code runJob}). For a Java or Scala lambda, which is all Spark and delta-spark pass in
 * Spark 4, cleaning changes nothing unless the lambda was declared in a Scala or Ammonite REPL;
 * but first it reads the class file that declared the lambda (RDD, SparkContext, Delta's file
 * writer) and walks the bytecode of every method in it, looking for a {@code return} statement
 * in the lambda's body, and then serializes the function to check that it can be sent. A
 * micro-batch of a few rows makes some forty such calls on the driver, on the thread that
 * answers the Python driver: 8.6 % of the session JVM's samples in single-record replays of
 * three operators, the bytecode walk about two thirds of it (JFR: docs/testing.md).
 *
 * <p>The walk depends only on the lambda's class, so a class Spark cleaned without replacing the
 * function is not cleaned again. Nor is it serialized again here: the scheduler serializes every
 * task's function and RDD before the job runs ({@code DAGScheduler.submitMissingTasks}) and
 * fails the job with Spark's same "Task not serializable" then, so a function that cannot be
 * sent still fails, at its job rather than at the call that built the RDD. (The JVM functions a
 * session runs are Spark's and delta-spark's; PySpark pickles Python functions, it does not
 * Java-serialize them.) Anything else (a closure of an anonymous class, whose cleaning nulls
 * unused fields of each instance; a REPL's lambda; a class's first function) goes to Spark's
 * cleaner. Built by joins/spark/session.py for classic sessions; {@code TJ_SPARK_CONTEXT=spark}
 * builds Spark's own.
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
}
