package temporaljoins;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;

/**
 * {@link LocalFileSystem} for {@code FileContext} (Hadoop's {@code fs.local.LocalFs} builds its
 * own shell-forking raw file system): Delta's log store writes and renames commit files through
 * a FileContext.
 */
public class LocalFs extends ChecksumFs {

    public LocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
        super(new Raw(uri, conf));
    }

    /** Hadoop's {@code fs.local.RawLocalFs} over {@link LocalFileSystem.Raw}. */
    public static class Raw extends DelegateToFileSystem {

        public Raw(URI uri, Configuration conf) throws IOException, URISyntaxException {
            super(uri, new LocalFileSystem.Raw(), conf, "file", false);
        }

        @Override
        public int getUriDefaultPort() {
            return -1;  // no authority
        }

        @Override
        public boolean isValidName(String src) {
            return true;  // a local name may hold ':' and other characters HDFS refuses
        }
    }
}
