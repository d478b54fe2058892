package temporaljoins;

import java.util.List;
import java.util.Optional;
import org.apache.spark.connect.proto.Hint;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connect.planner.SparkConnectPlanner;
import org.apache.spark.sql.connect.plugin.RelationPlugin;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.sparkproject.connect.protobuf.Any;
import org.sparkproject.connect.protobuf.CodedInputStream;

/**
 * {@link DeltaTxn} for Spark Connect clients, on the Connect server
 * ({@code spark.connect.extensions.relation.classes}). The client sends a relation extension
 * holding a Hint named {@code temporaljoins.txn:<operation>:<request JSON>} over the data to
 * write (a placeholder for operations without data); the plugin runs the operation while the
 * plan is built and answers with a one-row relation of the answer JSON. Spark's own messages
 * carry it, so the client needs no protobuf of ours.
 */
public final class TxnPlugin implements RelationPlugin {
  public static final String PREFIX = "temporaljoins.txn:";
  private static final int RECURSION_LIMIT = 4096;

  static {
    // The server's own sessions read and write files too: the same lean configuration as a
    // classic session's (joins/spark/session.py).
    HadoopDefaults.trim();
  }

  @Override
  public Optional<LogicalPlan> transform(byte[] bytes, SparkConnectPlanner planner) {
    Hint hint;
    try {
      Any any = Any.parseFrom(bytes);
      if (!any.is(Hint.class)) {
        return Optional.empty();
      }
      // A micro-batch's plan nests deeper than protobuf's default limit of 100 levels; the
      // server parses its own messages with spark.connect.grpc.marshallerRecursionLimit.
      CodedInputStream input = any.getValue().newCodedInput();
      input.setRecursionLimit(RECURSION_LIMIT);
      hint = Hint.parseFrom(input);
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("temporal-joins: cannot read a relation extension", e);
    }
    if (!hint.getName().startsWith(PREFIX)) {
      return Optional.empty();
    }
    String rest = hint.getName().substring(PREFIX.length());
    int colon = rest.indexOf(':');
    String operation = rest.substring(0, colon);
    String request = rest.substring(colon + 1);
    SparkSession session = planner.session();
    String answer;
    try {
      answer = switch (operation) {
        case "stage" -> DeltaTxn.stage(session,
            Dataset.ofRows(session, planner.transformRelation(hint.getInput())), request);
        case "commit" -> DeltaTxn.commit(request);
        case "abandon" -> DeltaTxn.abandon(request);
        case "fence" -> DeltaTxn.fence(session, request);
        default -> throw new IllegalArgumentException("unknown operation " + operation);
      };
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("bad request " + request, e);
    }
    StructType schema = new StructType().add("answer", DataTypes.StringType, false);
    List<Row> rows = List.of(RowFactory.create(answer));
    return Optional.of(session.createDataFrame(rows, schema).logicalPlan());
  }
}
