"""An S3 bucket on loopback for the run-store tests: moto's server (PyPI), and the hadoop-aws
jars Spark reads ``s3a://`` with, resolved by Maven from Maven Central at the Hadoop version
of the installed pyspark (cached, never committed).

pyarrow takes the endpoint and the credentials from the AWS environment variables
(:meth:`MotoS3.env`); Spark takes them from ``spark.hadoop.fs.s3a.*`` (:meth:`MotoS3.spark_conf`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import TracebackType

from pytest_kafka_mirror.processes.managed import ManagedProcess, wait_until

__all__ = ["MotoS3", "hadoop_aws_jars", "hadoop_version"]

CACHE = Path(os.environ.get("KAFKA_MIRROR_TEST_CACHE", Path.home() / ".cache" / "kafka-mirror"))


def hadoop_version() -> str:
    """The Hadoop release pyspark ships (its ``hadoop-client-api-X.jar``)."""
    import pyspark

    for jar in (Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"):
        return jar.name[len("hadoop-client-api-"):-len(".jar")]
    raise FileNotFoundError("pyspark ships no hadoop-client-api jar: which Hadoop does it run on?")


def hadoop_aws_jars() -> list[Path]:
    """hadoop-aws of pyspark's Hadoop and its runtime dependencies (the AWS SDK bundle), by Maven."""
    version = hadoop_version()
    libs = CACHE / f"hadoop-aws-{version}"
    if not (libs / "done").exists():
        mvn = shutil.which("mvn")
        if mvn is None:
            raise FileNotFoundError("Maven (mvn) resolves hadoop-aws from Maven Central: install it")
        staging = libs.with_name(libs.name + ".staging")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        (staging / "pom.xml").write_text(
            '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            "<groupId>kafka-mirror</groupId><artifactId>s3a</artifactId><version>1</version><dependencies>"
            f"<dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-aws</artifactId>"
            f"<version>{version}</version></dependency></dependencies></project>")
        out = subprocess.run([mvn, "-B", "-ntp", "-q", "-f", str(staging / "pom.xml"), "dependency:copy-dependencies",
                              f"-DoutputDirectory={staging / 'libs'}", "-DincludeScope=runtime"],
                             capture_output=True, text=True, timeout=900, check=False, stdin=subprocess.DEVNULL)
        if out.returncode != 0:
            raise RuntimeError(f"mvn could not resolve hadoop-aws {version}: {(out.stdout + out.stderr)[-2000:]}")
        shutil.rmtree(libs, ignore_errors=True)
        (staging / "libs").rename(libs)
        shutil.rmtree(staging, ignore_errors=True)
        (libs / "done").touch()
    return sorted(libs.glob("*.jar"))


class MotoS3:
    """moto's S3 server on 127.0.0.1 (a free port), with ``bucket`` created."""

    def __init__(self, directory: Path, bucket: str = "kafka-mirror-runs") -> None:
        self.directory = directory
        self.bucket = bucket
        self.proc: ManagedProcess | None = None
        self.endpoint = ""

    def __enter__(self) -> MotoS3:
        server = shutil.which("moto_server") or str(Path(sys.executable).with_name("moto_server"))
        log = self.directory / "moto.log"
        self.proc = ManagedProcess("moto", [server, "-H", "127.0.0.1", "-p", "0"], log).start()

        def bound() -> bool:
            match = re.search(r"Running on http://127\.0\.0\.1:(\d+)", log.read_text() if log.exists() else "")
            if match:
                self.endpoint = f"http://127.0.0.1:{match.group(1)}"
            return bool(match) or not self.proc.running

        wait_until(bound, 60, "moto's S3 server to listen")
        if not self.endpoint:
            raise RuntimeError(f"moto's server did not start: {self.proc.log_tail()}")
        import boto3

        boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                     region_name="us-east-1").create_bucket(Bucket=self.bucket)
        return self

    def env(self) -> dict[str, str]:
        """The AWS environment pyarrow reads (the driver's and, through spark.executorEnv, the executors')."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}

    def spark_conf(self) -> str:
        """spark-defaults.conf lines: hadoop-aws on the classpath, s3a pointed at this server, the
        executors given the same AWS environment."""
        jars = ",".join(str(p) for p in hadoop_aws_jars())
        lines = [f"spark.jars {jars}",
                 f"spark.hadoop.fs.s3a.endpoint {self.endpoint}",
                 "spark.hadoop.fs.s3a.path.style.access true",
                 "spark.hadoop.fs.s3a.connection.ssl.enabled false",
                 "spark.hadoop.fs.s3a.endpoint.region us-east-1",
                 "spark.hadoop.fs.s3a.access.key test",
                 "spark.hadoop.fs.s3a.secret.key test",
                 "spark.hadoop.fs.s3a.aws.credentials.provider org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"]
        lines += [f"spark.executorEnv.{k} {v}" for k, v in self.env().items()]
        return "\n".join(lines) + "\n"

    def objects(self, prefix: str = "") -> list[str]:
        import boto3

        s3 = boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                          region_name="us-east-1")
        keys: list[str] = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            keys += [o["Key"] for o in page.get("Contents", [])]
        return keys

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.proc is not None:
            self.proc.stop(timeout=5)
