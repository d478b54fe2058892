package temporaljoins;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.net.URI;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.delta.DeltaLog;
import org.apache.spark.sql.delta.DeltaOperations;
import org.apache.spark.sql.delta.OptimisticTransaction;
import org.apache.spark.sql.delta.actions.Action;
import org.apache.spark.sql.delta.actions.AddFile;
import org.apache.spark.sql.delta.actions.FileAction;
import org.apache.spark.sql.delta.actions.SetTransaction;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Writes committed by delta-spark's own transaction, in the two halves the runtime commits in
 * (joins/lake/txn_write.py is the caller; docs/lake.md the design). Staging opens a transaction,
 * checks its guards and has Spark tasks write the files straight into the table
 * ({@code writeFiles}); committing is one {@code OptimisticTransaction.commit} of those files, the
 * replaced files' removals and the app transaction. Until then no version references the files.
 *
 * <p>Why in Java: the same code serves a classic session (through py4j) and a Spark Connect
 * session (through {@link TxnPlugin}, on the server: a Connect client has no JVM to hold a
 * transaction in). Requests and answers are JSON, so both callers speak one protocol. A staged
 * transaction waits here, by its request id, until its commit or abandon; a repeated stage request
 * gets the first answer.
 */
public final class DeltaTxn {
  private DeltaTxn() {}

  /** The app id a successor's fence commits and every guarded transaction reads. */
  public static final String FENCE_APP = "temporal_joins.fence";

  private static final String[] CONFLICTS = {
    "ConcurrentTransactionException", "ConcurrentAppendException",
    "ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException",
    "MetadataChangedException", "ProtocolChangedException", "ConcurrentWriteException"};

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Map<String, Staged> STAGED = new ConcurrentHashMap<>();
  /** The last stage answers by request id, for a request planned twice (bounded: LRU). */
  private static final Map<String, String> ANSWERED = java.util.Collections.synchronizedMap(
      new java.util.LinkedHashMap<>(256, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, String> eldest) {
          return size() > 1024;
        }
      });

  private static final class Staged {
    final SparkSession spark;
    final DeltaLog log;
    final OptimisticTransaction txn;
    final List<FileAction> adds;
    final List<Action> removes = new ArrayList<>();
    final JsonNode request;

    Staged(SparkSession spark, DeltaLog log, OptimisticTransaction txn, List<FileAction> adds,
           JsonNode request) {
      this.spark = spark;
      this.log = log;
      this.txn = txn;
      this.adds = adds;
      this.request = request;
    }
  }

  /**
   * Stage {@code data} for the table at request.path. Request: id, path, mode ("append" or
   * "overwrite"), partitionBy, schema and configuration (for a table this write creates, as its
   * version 0; with addColumns, the schema of an existing table widened by nullable columns, set
   * in this commit), replace ({column: [values]} or null: the whole table), appId and
   * appVersion (or null), expected (the version a guarded write must start from, or null),
   * guarded, skipEmpty, message. Answer: state "staged" (with files), "skipped" (the app
   * transaction is done), "empty", "conflict" (the guard failed) or "outside" (a row outside the
   * replaced partitions).
   */
  public static String stage(SparkSession spark, Dataset<?> data, String request) throws IOException {
    JsonNode req = JSON.readTree(request);
    String id = req.get("id").asText();
    String before = ANSWERED.get(id);
    if (before != null) {
      return before;
    }
    String answer = doStage(spark, data, req, id);
    ANSWERED.put(id, answer);
    return answer;
  }

  private static String doStage(SparkSession spark, Dataset<?> data, JsonNode req, String id) {
    DeltaLog log = DeltaLog.forTable(spark, req.get("path").asText());
    OptimisticTransaction txn = NewTable.startTransaction(log);
    boolean guarded = req.path("guarded").asBoolean(false);
    if (guarded) {
      long expected = req.get("expected").asLong();
      if (txn.readVersion() != expected) {
        return state("conflict").put("message", "expected the table at version " + expected
            + " but it is at " + txn.readVersion()).toString();
      }
      // Any commit after this one's start that adds or removes files, changes metadata or
      // fences the table now fails this commit.
      txn.readWholeTable();
      DeltaFiles.doneVersion(txn, FENCE_APP);
    }
    if (appTxnDone(txn, req)) {
      return state("skipped").toString();
    }
    if (txn.readVersion() < 0) {
      txn.updateMetadataForNewTable(newTable(req));
    } else if (req.path("addColumns").asBoolean(false)) {
      // In this commit, not an ALTER TABLE before it: a guarded write stays one commit.
      org.apache.spark.sql.delta.actions.Metadata m = txn.metadata();
      txn.updateMetadata(new org.apache.spark.sql.delta.actions.Metadata(
          m.id(), m.name(), m.description(), m.format(), req.get("schema").asText(),
          m.partitionColumns(), m.configuration(), m.createdTime()), false);
    }
    long started = System.currentTimeMillis();
    List<FileAction> adds = new ArrayList<>(CollectionConverters.asJava(txn.writeFiles(data)));
    Staged staged = new Staged(spark, log, txn, adds, req);
    // Delta leaves an empty file out of its commit only when it collects statistics (the row
    // count says it is empty); without them it commits the file, which is then no leftover.
    if (txn.metadata().partitionColumns().isEmpty()
        && !"false".equalsIgnoreCase(spark.conf().get("spark.databricks.delta.stats.collect", "true"))) {
      java.util.Set<String> added = new java.util.HashSet<>();
      adds.forEach(add -> added.add(add.path()));
      DeltaFiles.removeEmptyFirstFile(txn, log, added, started);
    }
    boolean overwrite = overwrite(req);
    if (adds.isEmpty() && !overwrite && req.path("skipEmpty").asBoolean(false)) {
      return state("empty").toString();
    }
    JsonNode replace = req.path("replace");
    boolean partial = replace.isObject();
    for (FileAction add : adds) {
      Map<String, String> values = DeltaFiles.partitionValues(add);
      String outside = partial ? DeltaFiles.outside(values, replace) : null;
      if (outside != null) {
        delete(staged);
        return state("outside").put("column", outside).put("value", values.get(outside))
            .toString();
      }
    }
    if (overwrite) {
      txn.readWholeTable();  // a concurrent change to what is replaced conflicts
      long now = System.currentTimeMillis();
      for (AddFile file : DeltaFiles.currentFiles(txn)) {
        if (!partial || DeltaFiles.outside(DeltaFiles.partitionValues(file), replace) == null) {
          staged.removes.add(file.removeWithTimestamp(now, true));
        }
      }
    }
    STAGED.put(id, staged);
    ObjectNode answer = state("staged");
    ArrayNode files = answer.putArray("files");
    for (FileAction add : adds) {
      ObjectNode file = files.addObject();
      file.put("path", add.path());
      file.set("partition", JSON.valueToTree(DeltaFiles.partitionValues(add)));
      file.put("rows", DeltaFiles.rows((AddFile) add));
    }
    return answer.toString();
  }

  /**
   * Commit a staged write. Answer: state "committed" with the version, "conflict" with the
   * exception's name (another commit won; the files are removed), or "failed" with the error
   * (landed or not, the log cannot say here: the files stay for vacuum_orphans).
   */
  public static String commit(String id) {
    Staged staged = take(id);
    JsonNode req = staged.request;
    List<Action> actions = new ArrayList<>(staged.adds);
    actions.addAll(staged.removes);
    String appId = appId(req);
    if (appId != null) {
      actions.add(new SetTransaction(appId, req.get("appVersion").asLong(),
          Option.apply((Object) System.currentTimeMillis())));
    }
    List<String> partitionBy = strings(req.path("partitionBy"));
    JsonNode message = req.path("message");
    try {
      long version = staged.txn.commit(
          CollectionConverters.asScala(actions).toList(),
          write(staged.txn.readVersion() < 0 ? SaveMode.ErrorIfExists
              : overwrite(req) ? SaveMode.Overwrite : SaveMode.Append,
              partitionBy.isEmpty() ? Option.empty()
                  : Option.apply(CollectionConverters.asScala(partitionBy).toList()),
              message.isTextual() ? message.asText() : null));
      return state("committed").put("version", version).toString();
    } catch (RuntimeException e) {
      String conflict = conflictName(e);
      if (conflict == null) {
        return state("failed").put("message", String.valueOf(e)).toString();
      }
      if (staged.txn.readVersion() < 0 && !req.path("guarded").asBoolean(false)) {
        String appended = appendToWinner(staged, actions);
        if (appended != null) {
          return appended;
        }
      }
      delete(staged);
      return state("conflict").put("conflict", conflict).toString();
    }
  }

  /**
   * A creation that lost to another writer's: append the same files to the winner's table when
   * it has this write's schema and partitioning (two first writes of one table both land),
   * nothing when this write's app transaction is there already. Null: a conflict after all.
   */
  private static String appendToWinner(Staged staged, List<Action> actions) {
    OptimisticTransaction txn = staged.log.startTransaction();
    var ours = staged.txn.metadata();
    var theirs = txn.metadata();
    if (!theirs.schema().equals(ours.schema())
        || !theirs.partitionColumns().equals(ours.partitionColumns())) {
      return null;
    }
    if (appTxnDone(txn, staged.request)) {
      delete(staged);
      return state("skipped").toString();
    }
    try {
      long version = txn.commit(CollectionConverters.asScala(actions).toList(),
          write(SaveMode.Append, Option.empty(), null));
      return state("committed").put("version", version).toString();
    } catch (RuntimeException e) {
      return null;
    }
  }

  /** The metadata of a table this write creates: request.schema (Spark's JSON), partitionBy,
   * configuration (table properties). */
  private static org.apache.spark.sql.delta.actions.Metadata newTable(JsonNode req) {
    List<String> partitionBy = strings(req.path("partitionBy"));
    Map<String, String> configuration = new HashMap<>();
    req.path("configuration").fields().forEachRemaining(e ->
        configuration.put(e.getKey(), e.getValue().asText()));
    return new org.apache.spark.sql.delta.actions.Metadata(
        java.util.UUID.randomUUID().toString(), null, null,
        new org.apache.spark.sql.delta.actions.Format("parquet",
            scala.collection.immutable.Map$.MODULE$.empty()),
        req.get("schema").asText(), CollectionConverters.asScala(partitionBy).toList(),
        scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(configuration)),
        Option.apply((Object) System.currentTimeMillis()));
  }

  /** Give a staged write up: its files are removed, nothing is committed. */
  public static String abandon(String id) {
    Staged staged = STAGED.remove(id);
    if (staged != null) {
      delete(staged);
    }
    return state("abandoned").toString();
  }

  /**
   * Commit the fence's app transaction (nothing else): every guarded transaction begun before it
   * then fails at its commit. Request: path, message. Answer: the new version.
   */
  public static String fence(SparkSession spark, String request) throws IOException {
    JsonNode req = JSON.readTree(request);
    OptimisticTransaction txn = DeltaLog.forTable(spark, req.get("path").asText())
        .startTransaction();
    long now = System.currentTimeMillis();
    long version = Math.max(DeltaFiles.doneVersion(txn, FENCE_APP) + 1, now);
    List<Action> actions = List.of(new SetTransaction(FENCE_APP, version, Option.apply((Object) now)));
    long committed = txn.commit(CollectionConverters.asScala(actions).toList(),
        write(SaveMode.Append, Option.empty(), req.get("message").asText()));
    return state("committed").put("version", committed).toString();
  }

  private static void delete(Staged staged) {
    for (FileAction add : staged.adds) {
      try {
        // The checksummed local file system removes its `.crc` sidecar with the file.
        Path file = new Path(staged.log.dataPath(), new Path(new URI(add.path())));
        FileSystem fs = file.getFileSystem(staged.log.newDeltaHadoopConf());
        fs.delete(file, false);
      } catch (Exception e) {
        System.err.println("temporal-joins: could not remove uncommitted file " + add.path()
            + ": " + e);
      }
    }
    staged.adds.clear();
  }

  private static String appId(JsonNode req) {
    JsonNode appId = req.path("appId");
    return appId.isTextual() ? appId.asText() : null;
  }

  /** Whether the request's app transaction is committed as of the transaction's snapshot. */
  private static boolean appTxnDone(OptimisticTransaction txn, JsonNode req) {
    String appId = appId(req);
    return appId != null && DeltaFiles.doneVersion(txn, appId) >= req.get("appVersion").asLong();
  }

  private static boolean overwrite(JsonNode req) {
    return "overwrite".equals(req.path("mode").asText("append"));
  }

  private static List<String> strings(JsonNode array) {
    List<String> out = new ArrayList<>();
    array.forEach(item -> out.add(item.asText()));
    return out;
  }

  private static Staged take(String id) {
    Staged staged = STAGED.remove(id);
    if (staged == null) {
      throw new IllegalStateException("no staged write " + id + " in this process: it was "
          + "committed or abandoned already, or staged by another Spark driver");
    }
    return staged;
  }

  static String conflictName(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      String text = t.getClass().getName() + ": " + t.getMessage();
      for (String name : CONFLICTS) {
        if (text.contains(name)) {
          return name;
        }
      }
    }
    return null;
  }

  private static DeltaOperations.Write write(SaveMode mode,
      Option<scala.collection.immutable.Seq<String>> partitionBy, String message) {
    return new DeltaOperations.Write(mode, partitionBy, Option.empty(), Option.apply(message),
        Option.empty(), Option.empty(), Option.empty(), Option.empty(), Option.empty());
  }

  private static ObjectNode state(String state) {
    return JSON.createObjectNode().put("state", state);
  }
}
