package temporaljoins;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.delta.DeltaLog;
import org.apache.spark.sql.delta.OptimisticTransaction;
import org.apache.spark.sql.delta.VersionChecksum;
import org.apache.spark.sql.delta.actions.AddFile;
import org.apache.spark.sql.delta.actions.FileAction;
import org.apache.spark.sql.delta.actions.SetTransaction;
import scala.Option;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * What {@link DeltaTxn} reads of a table: app transactions and the file list from the version
 * checksum, a file's partition values and rows, and the empty file Spark's writer may leave.
 */
final class DeltaFiles {
  private DeltaFiles() {}

  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * The app id's last committed version as of the transaction's snapshot (-1: none), from the
   * version checksum when it carries the app transactions: delta-spark's own txnVersion replays
   * the log in three Spark jobs (docs/lake.md). The app id is registered as read, so a concurrent
   * commit of it fails this transaction.
   */
  static long doneVersion(OptimisticTransaction txn, String appId) {
    Option<VersionChecksum> checksum = txn.snapshot().checksumOpt();
    if (checksum.isEmpty() || checksum.get().setTransactions().isEmpty()) {
      return txn.txnVersion(appId);
    }
    txn.readTxn().addOne(appId);
    long done = -1;
    for (SetTransaction entry : CollectionConverters.asJava(checksum.get().setTransactions().get())) {
      if (entry.appId().equals(appId)) {
        done = Math.max(done, entry.version());
      }
    }
    return done;
  }

  /** The snapshot's files: from the checksum when it lists them (small tables), else its state. */
  static List<AddFile> currentFiles(OptimisticTransaction txn) {
    if (txn.readVersion() < 0) {
      return List.of();   // a table created by this write: listing its log would be a query
    }
    Option<VersionChecksum> checksum = txn.snapshot().checksumOpt();
    if (!checksum.isEmpty() && !checksum.get().allFiles().isEmpty()) {
      return CollectionConverters.asJava(checksum.get().allFiles().get());
    }
    return CollectionConverters.asJava(txn.filterFiles());
  }

  static String outside(Map<String, String> values, JsonNode replace) {
    for (Map.Entry<String, JsonNode> allowed : (Iterable<Map.Entry<String, JsonNode>>)
        replace::fields) {
      String value = values.get(allowed.getKey());
      boolean found = false;
      for (JsonNode candidate : allowed.getValue()) {
        if (candidate.isNull() ? value == null : candidate.asText().equals(value)) {
          found = true;
          break;
        }
      }
      if (!found) {
        return allowed.getKey();
      }
    }
    return null;
  }

  static Map<String, String> partitionValues(FileAction add) {
    Map<String, String> values = new HashMap<>();
    scala.collection.Iterator<Tuple2<String, String>> entries = add.partitionValues().iterator();
    while (entries.hasNext()) {
      Tuple2<String, String> entry = entries.next();
      values.put(entry._1(), entry._2());
    }
    return values;
  }

  static long rows(AddFile add) {
    if (add.stats() == null) {
      return 0;
    }
    try {
      return JSON.readTree(add.stats()).path("numRecords").asLong(0);
    } catch (IOException e) {
      return 0;
    }
  }

  /**
   * An unpartitioned write whose first task had no rows wrote an empty file (Spark's writer
   * keeps one file with the schema), which Delta leaves out of the commit: remove it, or every
   * small batch would leave one orphan in the table's folder. Only files of no rows written
   * since this write began, and that no commit references, are candidates.
   */
  static void removeEmptyFirstFile(OptimisticTransaction txn, DeltaLog log,
                                   java.util.Set<String> added, long started) {
    try {
      Path root = log.dataPath();
      var conf = log.newDeltaHadoopConf();
      FileSystem fs = root.getFileSystem(conf);
      for (org.apache.hadoop.fs.FileStatus file : fs.listStatus(root,
          p -> p.getName().startsWith("part-00000-") && p.getName().endsWith(".parquet"))) {
        String name = file.getPath().getName();
        if (file.getModificationTime() + 2000 < started || added.contains(name)) {
          continue;
        }
        var input = org.apache.parquet.hadoop.util.HadoopInputFile.fromStatus(file, conf);
        long rows;
        // The table's configuration: ParquetFileReader.open(input) alone builds a new Hadoop
        // Configuration, which parses core-default.xml again (2 % of a replay's driver samples).
        var options = org.apache.parquet.HadoopReadOptions.builder(conf).build();
        try (var reader = org.apache.parquet.hadoop.ParquetFileReader.open(input, options)) {
          rows = reader.getRecordCount();
        }
        if (rows == 0 && uncommitted(txn, name)) {
          fs.delete(file.getPath(), false);
        }
      }
    } catch (IOException | RuntimeException e) {
      System.err.println("temporal-joins: could not look for an empty first file in "
          + log.dataPath() + ": " + e);
    }
  }

  /**
   * Whether an empty file is no commit's: a write without statistics (or another writer)
   * commits its empty files. Nothing references a file before the table's first commit; after
   * it, the checksum's file list says (tables of up to allFilesInCrc.thresholdNumFiles files).
   * On a larger table the file is left for vacuum_orphans: tidiness never costs a committed file.
   */
  private static boolean uncommitted(OptimisticTransaction txn, String name) {
    if (txn.readVersion() < 0) {
      return true;
    }
    Option<VersionChecksum> checksum = txn.snapshot().checksumOpt();
    if (checksum.isEmpty() || checksum.get().allFiles().isEmpty()) {
      return false;
    }
    for (AddFile file : CollectionConverters.asJava(checksum.get().allFiles().get())) {
      if (file.path().equals(name)) {
        return false;
      }
    }
    return true;
  }
}
