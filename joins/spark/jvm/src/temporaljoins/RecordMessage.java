package temporaljoins;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * The message naming a bad input record (a duplicate version, a null ts), filled from a template
 * that Python builds (joins/asof/errors.py) so that the SQL plans and the index report a record
 * alike, and Python can read the record back from a failure however Spark wraps it.
 *
 * <p>The template is a list of pieces, literal text and placeholders alternating, literal first:
 * a column name in the text may contain anything, so placeholders are not searched for in it.
 */
final class RecordMessage implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final char[] HEX = "0123456789ABCDEF".toCharArray();

  private final String[] pieces;

  RecordMessage(List<String> pieces) {
    this.pieces = pieces.toArray(new String[0]);
    for (int i = 1; i < this.pieces.length; i += 2) {
      switch (this.pieces[i]) {
        case "key", "ts", "key_hex", "ts_hex" -> { }
        default -> throw new IllegalStateException("as-of index: unknown placeholder " + this.pieces[i]);
      }
    }
  }

  /** The message for a record; key and ts as they print in Spark (null for a null value). */
  String fill(String key, String ts) {
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < pieces.length; i++) {
      if (i % 2 == 0) {
        out.append(pieces[i]);
        continue;
      }
      switch (pieces[i]) {
        case "key" -> out.append(key == null ? "null" : key);
        case "ts" -> out.append(ts == null ? "null" : ts);
        case "key_hex" -> out.append(hex(key));
        default -> out.append(hex(ts));
      }
    }
    return out.toString();
  }

  /** Upper-case hex of the UTF-8 bytes, as Spark SQL's hex(string); "null" for null. */
  static String hex(String text) {
    if (text == null) return "null";
    byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
    char[] out = new char[2 * bytes.length];
    for (int i = 0; i < bytes.length; i++) {
      out[2 * i] = HEX[(bytes[i] >> 4) & 0xF];
      out[2 * i + 1] = HEX[bytes[i] & 0xF];
    }
    return new String(out);
  }
}
