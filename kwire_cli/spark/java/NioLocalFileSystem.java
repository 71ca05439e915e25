// The local file system kwire spark-decode's local sessions write their output through: Hadoop's
// RawLocalFileSystem, with setPermission done by chmod(2) through java.nio.
//
// Without Hadoop's native library (pyspark ships none), RawLocalFileSystem sets the permission of
// every file and directory it creates by running a chmod process: about 750 processes for the rows
// of 20 capture files (20 tasks x 12 APIs: each output file, its .crc file and each directory),
// (the driver JVM's CPU 0.93x without them, 3 paired runs). The modes set are the same (Hadoop's, after its umask); only
// a mode with the sticky bit, which java.nio cannot set, still goes to Hadoop's own way. Raw: no
// .crc checksum files beside the output.
package kwire.spark;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

public class NioLocalFileSystem extends RawLocalFileSystem {
    // bit i of a mode (0 = others' execute ... 8 = owner's read)
    private static final PosixFilePermission[] BITS = {
        PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
        PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
        PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ};

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
        short mode = permission.toShort();
        if ((mode & ~0777) != 0) {
            super.setPermission(p, permission);
            return;
        }
        Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
        for (int i = 0; i < BITS.length; i++) {
            if ((mode & (1 << i)) != 0) {
                set.add(BITS[i]);
            }
        }
        Files.setPosixFilePermissions(pathToFile(p).toPath(), set);
    }
}
