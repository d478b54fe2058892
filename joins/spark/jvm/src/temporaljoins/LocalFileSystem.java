package temporaljoins;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system (`file:`) without a shell.
 *
 * <p>Without Hadoop's native library (pip's pyspark has none), {@code RawLocalFileSystem} forks
 * {@code chmod} for every file it creates and {@code readlink} for every link status that
 * {@code FileContext} asks before a rename: a Delta commit on a local table forks a dozen
 * processes, a few milliseconds of CPU each (strace of 20 small writes: about 500 forks). Java's
 * own file API does the same without a process. Everything else is Hadoop's.
 *
 * <p>Sessions the project starts set {@code fs.file.impl} to this class and
 * {@code fs.AbstractFileSystem.file.impl} to {@link LocalFs} (joins/spark/session.py).
 */
public class LocalFileSystem extends org.apache.hadoop.fs.LocalFileSystem {

    public LocalFileSystem() {
        super(new Raw());
    }

    /** The raw (checksum-free) half: permissions and links through java.nio. */
    public static class Raw extends RawLocalFileSystem {

        @Override
        public void setPermission(Path p, FsPermission permission) throws IOException {
            Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(permission.toShort()));
        }

        @Override
        public FileStatus getFileLinkStatus(Path f) throws IOException {
            java.nio.file.Path local = pathToFile(f).toPath();
            if (!Files.isSymbolicLink(local)) {
                return getFileStatus(f);
            }
            Path target = new Path(Files.readSymbolicLink(local).toString());
            try {
                FileStatus st = getFileStatus(f);
                return new FileStatus(st.getLen(), false, st.getReplication(), st.getBlockSize(),
                        st.getModificationTime(), st.getAccessTime(), st.getPermission(),
                        st.getOwner(), st.getGroup(), target, f);
            } catch (FileNotFoundException dangling) {
                // A link whose target is gone still exists, as Hadoop's own answer says.
                return new FileStatus(0, false, 0, 0, 0, 0, FsPermission.getDefault(), "", "",
                        target, f);
            }
        }

        @Override
        public Path getLinkTarget(Path f) throws IOException {
            FileStatus st = getFileLinkStatus(f);
            if (!st.isSymlink()) {
                throw new IOException("Path " + f + " is not a symbolic link");
            }
            return st.getSymlink();
        }

        @Override
        public boolean supportsSymlinks() {
            return true;
        }
    }

    static Set<PosixFilePermission> posix(int mode) {
        PosixFilePermission[] bits = {  // from 0400 down to 0001
            PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE,
            PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.GROUP_READ,
            PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE,
            PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE,
            PosixFilePermission.OTHERS_EXECUTE};
        Set<PosixFilePermission> out = EnumSet.noneOf(PosixFilePermission.class);
        for (int i = 0; i < bits.length; i++) {
            if ((mode & (0400 >> i)) != 0) {
                out.add(bits[i]);
            }
        }
        return out;
    }
}
