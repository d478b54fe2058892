package temporaljoins;

import py4j.Gateway;

/**
 * Releases many py4j object ids in one call (joins/spark/py4j_release.py): py4j's own protocol
 * releases one id a round trip.
 */
public final class Py4jRelease {
  private Py4jRelease() {}

  /** Forgets every id of the comma-separated list, as py4j's memory command does for one. */
  public static void release(Gateway gateway, String ids) {
    int start = 0;
    int n = ids.length();
    while (start < n) {
      int end = ids.indexOf(',', start);
      if (end < 0) end = n;
      if (end > start) gateway.deleteObject(ids.substring(start, end));
      start = end + 1;
    }
  }
}
