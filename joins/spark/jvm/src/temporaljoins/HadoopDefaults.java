package temporaljoins;

import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.slf4j.LoggerFactory;

/**
 * Hadoop's configuration without the YARN and MapReduce defaults, which no job of a Spark session
 * reads.
 *
 * <p>Why: every Spark job that reads or writes files ships a Hadoop configuration with its tasks
 * or a broadcast, serialized on the driver (each entry's source file name gzip-compressed on its
 * own: a compressor per entry) and read back in every task. Once a MapReduce or YARN class is
 * loaded (Spark's file writer loads MapReduce's {@code Job} for every write), Hadoop adds
 * yarn-default.xml (527 entries) and mapred-default.xml (194) to every configuration in the JVM:
 * 1,150 entries instead of 430. A staged Delta write of three rows spent 41 of its 90 ms of JVM
 * CPU on them (60 writes, warm, a local session).
 *
 * <p>Their keys configure YARN's daemons and MapReduce's jobs. The few a Spark job touches (the
 * file output committer's, the line reader's) default to the same values in code; a deployment's
 * own yarn-site.xml or mapred-site.xml stays. The classes that add the two files are loaded
 * first, so that none adds them back later. Sessions the project starts call {@link #trim} (a
 * classic one from joins/spark/session.py, a Connect server when it loads {@link TxnPlugin});
 * {@code TJ_HADOOP_DEFAULTS=keep} keeps them, and the sources' records below too: Hadoop's
 * configuration exactly as Hadoop builds it.
 *
 * <p>Trimming also drops each configuration's record of which file or call set each entry
 * ({@link #dropSources}). Hadoop keeps it only for its dumps of a configuration; reloading
 * without the two files left theirs in it (1,104 records for 383 entries), every copy of a
 * configuration copies it (Spark copies the session's for every query that touches files), and
 * every serialization writes it gzip-compressed entry by entry, a compressor per entry, read back
 * the same way in every task. Entries set later record their source again.
 */
public final class HadoopDefaults {
  private HadoopDefaults() {}

  /** {@code TJ_HADOOP_DEFAULTS=keep} in a process's environment: keep them all. */
  public static final String KEEP_ENV = "TJ_HADOOP_DEFAULTS";

  /** Default resources that no Spark job here reads. */
  static final String[] UNREAD = {"mapred-default.xml", "yarn-default.xml"};

  /** Every class whose static initializer adds one of them (hadoop-client-api 3.5's). */
  private static final String[] ADDERS = {
    "org.apache.hadoop.mapred.JobConf", "org.apache.hadoop.mapred.JobClient",
    "org.apache.hadoop.mapreduce.Job", "org.apache.hadoop.mapreduce.Cluster",
    "org.apache.hadoop.yarn.conf.YarnConfiguration"};

  /**
   * Drops {@link #UNREAD} from the JVM's default resources and has every configuration reload
   * without them (what was set in code stays). Returns the resources dropped; nothing where
   * Hadoop's configuration is not what this expects.
   */
  public static synchronized List<String> trim() {
    if ("keep".equalsIgnoreCase(System.getenv(KEEP_ENV))) {
      return List.of();
    }
    ClassLoader loader = Configuration.class.getClassLoader();
    for (String name : ADDERS) {
      try {
        Class.forName(name, true, loader);
      } catch (ClassNotFoundException | LinkageError e) {
        // Not on this class path: it cannot add anything either.
      }
    }
    List<String> dropped = new ArrayList<>();
    try {
      List<?> resources = resources();
      for (String name : UNREAD) {
        if (resources.remove(name)) {
          dropped.add(name);
        }
      }
    } catch (ReflectiveOperationException | RuntimeException e) {
      return dropped;
    }
    if (!dropped.isEmpty()) {
      Configuration.reloadExistingConfigurations();
      // A server's log then says which of its configurations are lean (the cluster tests read it).
      LoggerFactory.getLogger(HadoopDefaults.class).info(
          "Hadoop configurations without {} ({}=keep keeps them)", dropped, KEEP_ENV);
    }
    dropSources();
    return dropped;
  }

  /**
   * Every configuration in the JVM with its entries loaded and no record of their sources
   * (Hadoop creates the record again, for the entries set from then on). Nothing where Hadoop's
   * configuration is not what this expects.
   */
  static void dropSources() {
    Field sources;
    List<Configuration> all;
    try {
      sources = sourcesField();
      Field registry = Configuration.class.getDeclaredField("REGISTRY");
      registry.setAccessible(true);
      synchronized (Configuration.class) {
        all = ((Map<?, ?>) registry.get(null)).keySet().stream()
            .map(Configuration.class::cast).toList();
      }
    } catch (ReflectiveOperationException | RuntimeException e) {
      return;  // another Hadoop: its configurations stay as they are
    }
    for (Configuration conf : all) {
      try {
        synchronized (conf) {
          conf.size();  // loads the entries now: a later load would record their sources again
          sources.set(conf, null);
        }
      } catch (ReflectiveOperationException | RuntimeException e) {
        // One that cannot load (a resource of its own missing) fails where its owner reads it,
        // as before; the others still lose their records.
      }
    }
  }

  /** How many entries' sources `conf` records (for tests and diagnostics). */
  public static int sourcesRecorded(Configuration conf) {
    try {
      Map<?, ?> map = (Map<?, ?>) sourcesField().get(conf);
      return map == null ? 0 : map.size();
    } catch (ReflectiveOperationException e) {
      return -1;
    }
  }

  private static Field sourcesField() throws NoSuchFieldException {
    Field field = Configuration.class.getDeclaredField("updatingResource");
    field.setAccessible(true);
    return field;
  }

  /** The default resources the JVM's configurations load (for tests and diagnostics). */
  public static List<String> defaultResources() {
    try {
      List<String> names = new ArrayList<>();
      for (Object name : resources()) {
        names.add(String.valueOf(name));
      }
      return names;
    } catch (ReflectiveOperationException e) {
      return List.of();
    }
  }

  /** Hadoop's own list of default resources (private: no API removes one). */
  private static List<?> resources() throws ReflectiveOperationException {
    Field field = Configuration.class.getDeclaredField("defaultResources");
    field.setAccessible(true);
    return (List<?>) field.get(null);
  }
}
