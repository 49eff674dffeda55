"""Generated from kubernetes_asyncio 36.1.0 by: python -m t9k_jobs.api.pod_schema --write. Do not edit.

The Kubernetes models a PodTemplateSpec holds: ``{model: ({wire name: OpenAPI type}, required names)}``
(:mod:`.pod_schema` checks templates against them)."""

from __future__ import annotations

MODELS: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {
    'CoreV1ResourceClaim': (
        {
            'name': 'str',
            'request': 'str',
        },
        ('name',),
    ),
    'V1AWSElasticBlockStoreVolumeSource': (
        {
            'fsType': 'str',
            'partition': 'int',
            'readOnly': 'bool',
            'volumeID': 'str',
        },
        ('volumeID',),
    ),
    'V1Affinity': (
        {
            'nodeAffinity': 'V1NodeAffinity',
            'podAffinity': 'V1PodAffinity',
            'podAntiAffinity': 'V1PodAntiAffinity',
        },
        (),
    ),
    'V1AppArmorProfile': (
        {
            'localhostProfile': 'str',
            'type': 'str',
        },
        ('type',),
    ),
    'V1AzureDiskVolumeSource': (
        {
            'cachingMode': 'str',
            'diskName': 'str',
            'diskURI': 'str',
            'fsType': 'str',
            'kind': 'str',
            'readOnly': 'bool',
        },
        ('diskName', 'diskURI',),
    ),
    'V1AzureFileVolumeSource': (
        {
            'readOnly': 'bool',
            'secretName': 'str',
            'shareName': 'str',
        },
        ('secretName', 'shareName',),
    ),
    'V1CSIVolumeSource': (
        {
            'driver': 'str',
            'fsType': 'str',
            'nodePublishSecretRef': 'V1LocalObjectReference',
            'readOnly': 'bool',
            'volumeAttributes': 'dict(str, str)',
        },
        ('driver',),
    ),
    'V1Capabilities': (
        {
            'add': 'list[str]',
            'drop': 'list[str]',
        },
        (),
    ),
    'V1CephFSVolumeSource': (
        {
            'monitors': 'list[str]',
            'path': 'str',
            'readOnly': 'bool',
            'secretFile': 'str',
            'secretRef': 'V1LocalObjectReference',
            'user': 'str',
        },
        ('monitors',),
    ),
    'V1CinderVolumeSource': (
        {
            'fsType': 'str',
            'readOnly': 'bool',
            'secretRef': 'V1LocalObjectReference',
            'volumeID': 'str',
        },
        ('volumeID',),
    ),
    'V1ClusterTrustBundleProjection': (
        {
            'labelSelector': 'V1LabelSelector',
            'name': 'str',
            'optional': 'bool',
            'path': 'str',
            'signerName': 'str',
        },
        ('path',),
    ),
    'V1ConfigMapEnvSource': (
        {
            'name': 'str',
            'optional': 'bool',
        },
        (),
    ),
    'V1ConfigMapKeySelector': (
        {
            'key': 'str',
            'name': 'str',
            'optional': 'bool',
        },
        ('key',),
    ),
    'V1ConfigMapProjection': (
        {
            'items': 'list[V1KeyToPath]',
            'name': 'str',
            'optional': 'bool',
        },
        (),
    ),
    'V1ConfigMapVolumeSource': (
        {
            'defaultMode': 'int',
            'items': 'list[V1KeyToPath]',
            'name': 'str',
            'optional': 'bool',
        },
        (),
    ),
    'V1Container': (
        {
            'args': 'list[str]',
            'command': 'list[str]',
            'env': 'list[V1EnvVar]',
            'envFrom': 'list[V1EnvFromSource]',
            'image': 'str',
            'imagePullPolicy': 'str',
            'lifecycle': 'V1Lifecycle',
            'livenessProbe': 'V1Probe',
            'name': 'str',
            'ports': 'list[V1ContainerPort]',
            'readinessProbe': 'V1Probe',
            'resizePolicy': 'list[V1ContainerResizePolicy]',
            'resources': 'V1ResourceRequirements',
            'restartPolicy': 'str',
            'restartPolicyRules': 'list[V1ContainerRestartRule]',
            'securityContext': 'V1SecurityContext',
            'startupProbe': 'V1Probe',
            'stdin': 'bool',
            'stdinOnce': 'bool',
            'terminationMessagePath': 'str',
            'terminationMessagePolicy': 'str',
            'tty': 'bool',
            'volumeDevices': 'list[V1VolumeDevice]',
            'volumeMounts': 'list[V1VolumeMount]',
            'workingDir': 'str',
        },
        ('name',),
    ),
    'V1ContainerPort': (
        {
            'containerPort': 'int',
            'hostIP': 'str',
            'hostPort': 'int',
            'name': 'str',
            'protocol': 'str',
        },
        ('containerPort',),
    ),
    'V1ContainerResizePolicy': (
        {
            'resourceName': 'str',
            'restartPolicy': 'str',
        },
        ('resourceName', 'restartPolicy',),
    ),
    'V1ContainerRestartRule': (
        {
            'action': 'str',
            'exitCodes': 'V1ContainerRestartRuleOnExitCodes',
        },
        ('action',),
    ),
    'V1ContainerRestartRuleOnExitCodes': (
        {
            'operator': 'str',
            'values': 'list[int]',
        },
        ('operator',),
    ),
    'V1DownwardAPIProjection': (
        {
            'items': 'list[V1DownwardAPIVolumeFile]',
        },
        (),
    ),
    'V1DownwardAPIVolumeFile': (
        {
            'fieldRef': 'V1ObjectFieldSelector',
            'mode': 'int',
            'path': 'str',
            'resourceFieldRef': 'V1ResourceFieldSelector',
        },
        ('path',),
    ),
    'V1DownwardAPIVolumeSource': (
        {
            'defaultMode': 'int',
            'items': 'list[V1DownwardAPIVolumeFile]',
        },
        (),
    ),
    'V1EmptyDirVolumeSource': (
        {
            'medium': 'str',
            'sizeLimit': 'str',
        },
        (),
    ),
    'V1EnvFromSource': (
        {
            'configMapRef': 'V1ConfigMapEnvSource',
            'prefix': 'str',
            'secretRef': 'V1SecretEnvSource',
        },
        (),
    ),
    'V1EnvVar': (
        {
            'name': 'str',
            'value': 'str',
            'valueFrom': 'V1EnvVarSource',
        },
        ('name',),
    ),
    'V1EnvVarSource': (
        {
            'configMapKeyRef': 'V1ConfigMapKeySelector',
            'fieldRef': 'V1ObjectFieldSelector',
            'fileKeyRef': 'V1FileKeySelector',
            'resourceFieldRef': 'V1ResourceFieldSelector',
            'secretKeyRef': 'V1SecretKeySelector',
        },
        (),
    ),
    'V1EphemeralContainer': (
        {
            'args': 'list[str]',
            'command': 'list[str]',
            'env': 'list[V1EnvVar]',
            'envFrom': 'list[V1EnvFromSource]',
            'image': 'str',
            'imagePullPolicy': 'str',
            'lifecycle': 'V1Lifecycle',
            'livenessProbe': 'V1Probe',
            'name': 'str',
            'ports': 'list[V1ContainerPort]',
            'readinessProbe': 'V1Probe',
            'resizePolicy': 'list[V1ContainerResizePolicy]',
            'resources': 'V1ResourceRequirements',
            'restartPolicy': 'str',
            'restartPolicyRules': 'list[V1ContainerRestartRule]',
            'securityContext': 'V1SecurityContext',
            'startupProbe': 'V1Probe',
            'stdin': 'bool',
            'stdinOnce': 'bool',
            'targetContainerName': 'str',
            'terminationMessagePath': 'str',
            'terminationMessagePolicy': 'str',
            'tty': 'bool',
            'volumeDevices': 'list[V1VolumeDevice]',
            'volumeMounts': 'list[V1VolumeMount]',
            'workingDir': 'str',
        },
        ('name',),
    ),
    'V1EphemeralVolumeSource': (
        {
            'volumeClaimTemplate': 'V1PersistentVolumeClaimTemplate',
        },
        (),
    ),
    'V1ExecAction': (
        {
            'command': 'list[str]',
        },
        (),
    ),
    'V1FCVolumeSource': (
        {
            'fsType': 'str',
            'lun': 'int',
            'readOnly': 'bool',
            'targetWWNs': 'list[str]',
            'wwids': 'list[str]',
        },
        (),
    ),
    'V1FileKeySelector': (
        {
            'key': 'str',
            'optional': 'bool',
            'path': 'str',
            'volumeName': 'str',
        },
        ('key', 'path', 'volumeName',),
    ),
    'V1FlexVolumeSource': (
        {
            'driver': 'str',
            'fsType': 'str',
            'options': 'dict(str, str)',
            'readOnly': 'bool',
            'secretRef': 'V1LocalObjectReference',
        },
        ('driver',),
    ),
    'V1FlockerVolumeSource': (
        {
            'datasetName': 'str',
            'datasetUUID': 'str',
        },
        (),
    ),
    'V1GCEPersistentDiskVolumeSource': (
        {
            'fsType': 'str',
            'partition': 'int',
            'pdName': 'str',
            'readOnly': 'bool',
        },
        ('pdName',),
    ),
    'V1GRPCAction': (
        {
            'port': 'int',
            'service': 'str',
        },
        ('port',),
    ),
    'V1GitRepoVolumeSource': (
        {
            'directory': 'str',
            'repository': 'str',
            'revision': 'str',
        },
        ('repository',),
    ),
    'V1GlusterfsVolumeSource': (
        {
            'endpoints': 'str',
            'path': 'str',
            'readOnly': 'bool',
        },
        ('endpoints', 'path',),
    ),
    'V1HTTPGetAction': (
        {
            'host': 'str',
            'httpHeaders': 'list[V1HTTPHeader]',
            'path': 'str',
            'port': 'object',
            'scheme': 'str',
        },
        ('port',),
    ),
    'V1HTTPHeader': (
        {
            'name': 'str',
            'value': 'str',
        },
        ('name', 'value',),
    ),
    'V1HostAlias': (
        {
            'hostnames': 'list[str]',
            'ip': 'str',
        },
        ('ip',),
    ),
    'V1HostPathVolumeSource': (
        {
            'path': 'str',
            'type': 'str',
        },
        ('path',),
    ),
    'V1ISCSIVolumeSource': (
        {
            'chapAuthDiscovery': 'bool',
            'chapAuthSession': 'bool',
            'fsType': 'str',
            'initiatorName': 'str',
            'iqn': 'str',
            'iscsiInterface': 'str',
            'lun': 'int',
            'portals': 'list[str]',
            'readOnly': 'bool',
            'secretRef': 'V1LocalObjectReference',
            'targetPortal': 'str',
        },
        ('iqn', 'lun', 'targetPortal',),
    ),
    'V1ImageVolumeSource': (
        {
            'pullPolicy': 'str',
            'reference': 'str',
        },
        (),
    ),
    'V1KeyToPath': (
        {
            'key': 'str',
            'mode': 'int',
            'path': 'str',
        },
        ('key', 'path',),
    ),
    'V1LabelSelector': (
        {
            'matchExpressions': 'list[V1LabelSelectorRequirement]',
            'matchLabels': 'dict(str, str)',
        },
        (),
    ),
    'V1LabelSelectorRequirement': (
        {
            'key': 'str',
            'operator': 'str',
            'values': 'list[str]',
        },
        ('key', 'operator',),
    ),
    'V1Lifecycle': (
        {
            'postStart': 'V1LifecycleHandler',
            'preStop': 'V1LifecycleHandler',
            'stopSignal': 'str',
        },
        (),
    ),
    'V1LifecycleHandler': (
        {
            'exec': 'V1ExecAction',
            'httpGet': 'V1HTTPGetAction',
            'sleep': 'V1SleepAction',
            'tcpSocket': 'V1TCPSocketAction',
        },
        (),
    ),
    'V1LocalObjectReference': (
        {
            'name': 'str',
        },
        (),
    ),
    'V1ManagedFieldsEntry': (
        {
            'apiVersion': 'str',
            'fieldsType': 'str',
            'fieldsV1': 'object',
            'manager': 'str',
            'operation': 'str',
            'subresource': 'str',
            'time': 'datetime',
        },
        (),
    ),
    'V1NFSVolumeSource': (
        {
            'path': 'str',
            'readOnly': 'bool',
            'server': 'str',
        },
        ('path', 'server',),
    ),
    'V1NodeAffinity': (
        {
            'preferredDuringSchedulingIgnoredDuringExecution': 'list[V1PreferredSchedulingTerm]',
            'requiredDuringSchedulingIgnoredDuringExecution': 'V1NodeSelector',
        },
        (),
    ),
    'V1NodeSelector': (
        {
            'nodeSelectorTerms': 'list[V1NodeSelectorTerm]',
        },
        ('nodeSelectorTerms',),
    ),
    'V1NodeSelectorRequirement': (
        {
            'key': 'str',
            'operator': 'str',
            'values': 'list[str]',
        },
        ('key', 'operator',),
    ),
    'V1NodeSelectorTerm': (
        {
            'matchExpressions': 'list[V1NodeSelectorRequirement]',
            'matchFields': 'list[V1NodeSelectorRequirement]',
        },
        (),
    ),
    'V1ObjectFieldSelector': (
        {
            'apiVersion': 'str',
            'fieldPath': 'str',
        },
        ('fieldPath',),
    ),
    'V1ObjectMeta': (
        {
            'annotations': 'dict(str, str)',
            'creationTimestamp': 'datetime',
            'deletionGracePeriodSeconds': 'int',
            'deletionTimestamp': 'datetime',
            'finalizers': 'list[str]',
            'generateName': 'str',
            'generation': 'int',
            'labels': 'dict(str, str)',
            'managedFields': 'list[V1ManagedFieldsEntry]',
            'name': 'str',
            'namespace': 'str',
            'ownerReferences': 'list[V1OwnerReference]',
            'resourceVersion': 'str',
            'selfLink': 'str',
            'uid': 'str',
        },
        (),
    ),
    'V1OwnerReference': (
        {
            'apiVersion': 'str',
            'blockOwnerDeletion': 'bool',
            'controller': 'bool',
            'kind': 'str',
            'name': 'str',
            'uid': 'str',
        },
        ('apiVersion', 'kind', 'name', 'uid',),
    ),
    'V1PersistentVolumeClaimSpec': (
        {
            'accessModes': 'list[str]',
            'dataSource': 'V1TypedLocalObjectReference',
            'dataSourceRef': 'V1TypedObjectReference',
            'resources': 'V1VolumeResourceRequirements',
            'selector': 'V1LabelSelector',
            'storageClassName': 'str',
            'volumeAttributesClassName': 'str',
            'volumeMode': 'str',
            'volumeName': 'str',
        },
        (),
    ),
    'V1PersistentVolumeClaimTemplate': (
        {
            'metadata': 'V1ObjectMeta',
            'spec': 'V1PersistentVolumeClaimSpec',
        },
        ('spec',),
    ),
    'V1PersistentVolumeClaimVolumeSource': (
        {
            'claimName': 'str',
            'readOnly': 'bool',
        },
        ('claimName',),
    ),
    'V1PhotonPersistentDiskVolumeSource': (
        {
            'fsType': 'str',
            'pdID': 'str',
        },
        ('pdID',),
    ),
    'V1PodAffinity': (
        {
            'preferredDuringSchedulingIgnoredDuringExecution': 'list[V1WeightedPodAffinityTerm]',
            'requiredDuringSchedulingIgnoredDuringExecution': 'list[V1PodAffinityTerm]',
        },
        (),
    ),
    'V1PodAffinityTerm': (
        {
            'labelSelector': 'V1LabelSelector',
            'matchLabelKeys': 'list[str]',
            'mismatchLabelKeys': 'list[str]',
            'namespaceSelector': 'V1LabelSelector',
            'namespaces': 'list[str]',
            'topologyKey': 'str',
        },
        ('topologyKey',),
    ),
    'V1PodAntiAffinity': (
        {
            'preferredDuringSchedulingIgnoredDuringExecution': 'list[V1WeightedPodAffinityTerm]',
            'requiredDuringSchedulingIgnoredDuringExecution': 'list[V1PodAffinityTerm]',
        },
        (),
    ),
    'V1PodCertificateProjection': (
        {
            'certificateChainPath': 'str',
            'credentialBundlePath': 'str',
            'keyPath': 'str',
            'keyType': 'str',
            'maxExpirationSeconds': 'int',
            'signerName': 'str',
            'userAnnotations': 'dict(str, str)',
        },
        ('keyType', 'signerName',),
    ),
    'V1PodDNSConfig': (
        {
            'nameservers': 'list[str]',
            'options': 'list[V1PodDNSConfigOption]',
            'searches': 'list[str]',
        },
        (),
    ),
    'V1PodDNSConfigOption': (
        {
            'name': 'str',
            'value': 'str',
        },
        (),
    ),
    'V1PodOS': (
        {
            'name': 'str',
        },
        ('name',),
    ),
    'V1PodReadinessGate': (
        {
            'conditionType': 'str',
        },
        ('conditionType',),
    ),
    'V1PodResourceClaim': (
        {
            'name': 'str',
            'resourceClaimName': 'str',
            'resourceClaimTemplateName': 'str',
        },
        ('name',),
    ),
    'V1PodSchedulingGate': (
        {
            'name': 'str',
        },
        ('name',),
    ),
    'V1PodSchedulingGroup': (
        {
            'podGroupName': 'str',
        },
        (),
    ),
    'V1PodSecurityContext': (
        {
            'appArmorProfile': 'V1AppArmorProfile',
            'fsGroup': 'int',
            'fsGroupChangePolicy': 'str',
            'runAsGroup': 'int',
            'runAsNonRoot': 'bool',
            'runAsUser': 'int',
            'seLinuxChangePolicy': 'str',
            'seLinuxOptions': 'V1SELinuxOptions',
            'seccompProfile': 'V1SeccompProfile',
            'supplementalGroups': 'list[int]',
            'supplementalGroupsPolicy': 'str',
            'sysctls': 'list[V1Sysctl]',
            'windowsOptions': 'V1WindowsSecurityContextOptions',
        },
        (),
    ),
    'V1PodSpec': (
        {
            'activeDeadlineSeconds': 'int',
            'affinity': 'V1Affinity',
            'automountServiceAccountToken': 'bool',
            'containers': 'list[V1Container]',
            'dnsConfig': 'V1PodDNSConfig',
            'dnsPolicy': 'str',
            'enableServiceLinks': 'bool',
            'ephemeralContainers': 'list[V1EphemeralContainer]',
            'hostAliases': 'list[V1HostAlias]',
            'hostIPC': 'bool',
            'hostNetwork': 'bool',
            'hostPID': 'bool',
            'hostUsers': 'bool',
            'hostname': 'str',
            'hostnameOverride': 'str',
            'imagePullSecrets': 'list[V1LocalObjectReference]',
            'initContainers': 'list[V1Container]',
            'nodeName': 'str',
            'nodeSelector': 'dict(str, str)',
            'os': 'V1PodOS',
            'overhead': 'dict(str, str)',
            'preemptionPolicy': 'str',
            'priority': 'int',
            'priorityClassName': 'str',
            'readinessGates': 'list[V1PodReadinessGate]',
            'resourceClaims': 'list[V1PodResourceClaim]',
            'resources': 'V1ResourceRequirements',
            'restartPolicy': 'str',
            'runtimeClassName': 'str',
            'schedulerName': 'str',
            'schedulingGates': 'list[V1PodSchedulingGate]',
            'schedulingGroup': 'V1PodSchedulingGroup',
            'securityContext': 'V1PodSecurityContext',
            'serviceAccount': 'str',
            'serviceAccountName': 'str',
            'setHostnameAsFQDN': 'bool',
            'shareProcessNamespace': 'bool',
            'subdomain': 'str',
            'terminationGracePeriodSeconds': 'int',
            'tolerations': 'list[V1Toleration]',
            'topologySpreadConstraints': 'list[V1TopologySpreadConstraint]',
            'volumes': 'list[V1Volume]',
        },
        ('containers',),
    ),
    'V1PodTemplateSpec': (
        {
            'metadata': 'V1ObjectMeta',
            'spec': 'V1PodSpec',
        },
        (),
    ),
    'V1PortworxVolumeSource': (
        {
            'fsType': 'str',
            'readOnly': 'bool',
            'volumeID': 'str',
        },
        ('volumeID',),
    ),
    'V1PreferredSchedulingTerm': (
        {
            'preference': 'V1NodeSelectorTerm',
            'weight': 'int',
        },
        ('preference', 'weight',),
    ),
    'V1Probe': (
        {
            'exec': 'V1ExecAction',
            'failureThreshold': 'int',
            'grpc': 'V1GRPCAction',
            'httpGet': 'V1HTTPGetAction',
            'initialDelaySeconds': 'int',
            'periodSeconds': 'int',
            'successThreshold': 'int',
            'tcpSocket': 'V1TCPSocketAction',
            'terminationGracePeriodSeconds': 'int',
            'timeoutSeconds': 'int',
        },
        (),
    ),
    'V1ProjectedVolumeSource': (
        {
            'defaultMode': 'int',
            'sources': 'list[V1VolumeProjection]',
        },
        (),
    ),
    'V1QuobyteVolumeSource': (
        {
            'group': 'str',
            'readOnly': 'bool',
            'registry': 'str',
            'tenant': 'str',
            'user': 'str',
            'volume': 'str',
        },
        ('registry', 'volume',),
    ),
    'V1RBDVolumeSource': (
        {
            'fsType': 'str',
            'image': 'str',
            'keyring': 'str',
            'monitors': 'list[str]',
            'pool': 'str',
            'readOnly': 'bool',
            'secretRef': 'V1LocalObjectReference',
            'user': 'str',
        },
        ('image', 'monitors',),
    ),
    'V1ResourceFieldSelector': (
        {
            'containerName': 'str',
            'divisor': 'str',
            'resource': 'str',
        },
        ('resource',),
    ),
    'V1ResourceRequirements': (
        {
            'claims': 'list[CoreV1ResourceClaim]',
            'limits': 'dict(str, str)',
            'requests': 'dict(str, str)',
        },
        (),
    ),
    'V1SELinuxOptions': (
        {
            'level': 'str',
            'role': 'str',
            'type': 'str',
            'user': 'str',
        },
        (),
    ),
    'V1ScaleIOVolumeSource': (
        {
            'fsType': 'str',
            'gateway': 'str',
            'protectionDomain': 'str',
            'readOnly': 'bool',
            'secretRef': 'V1LocalObjectReference',
            'sslEnabled': 'bool',
            'storageMode': 'str',
            'storagePool': 'str',
            'system': 'str',
            'volumeName': 'str',
        },
        ('gateway', 'secretRef', 'system',),
    ),
    'V1SeccompProfile': (
        {
            'localhostProfile': 'str',
            'type': 'str',
        },
        ('type',),
    ),
    'V1SecretEnvSource': (
        {
            'name': 'str',
            'optional': 'bool',
        },
        (),
    ),
    'V1SecretKeySelector': (
        {
            'key': 'str',
            'name': 'str',
            'optional': 'bool',
        },
        ('key',),
    ),
    'V1SecretProjection': (
        {
            'items': 'list[V1KeyToPath]',
            'name': 'str',
            'optional': 'bool',
        },
        (),
    ),
    'V1SecretVolumeSource': (
        {
            'defaultMode': 'int',
            'items': 'list[V1KeyToPath]',
            'optional': 'bool',
            'secretName': 'str',
        },
        (),
    ),
    'V1SecurityContext': (
        {
            'allowPrivilegeEscalation': 'bool',
            'appArmorProfile': 'V1AppArmorProfile',
            'capabilities': 'V1Capabilities',
            'privileged': 'bool',
            'procMount': 'str',
            'readOnlyRootFilesystem': 'bool',
            'runAsGroup': 'int',
            'runAsNonRoot': 'bool',
            'runAsUser': 'int',
            'seLinuxOptions': 'V1SELinuxOptions',
            'seccompProfile': 'V1SeccompProfile',
            'windowsOptions': 'V1WindowsSecurityContextOptions',
        },
        (),
    ),
    'V1ServiceAccountTokenProjection': (
        {
            'audience': 'str',
            'expirationSeconds': 'int',
            'path': 'str',
        },
        ('path',),
    ),
    'V1SleepAction': (
        {
            'seconds': 'int',
        },
        ('seconds',),
    ),
    'V1StorageOSVolumeSource': (
        {
            'fsType': 'str',
            'readOnly': 'bool',
            'secretRef': 'V1LocalObjectReference',
            'volumeName': 'str',
            'volumeNamespace': 'str',
        },
        (),
    ),
    'V1Sysctl': (
        {
            'name': 'str',
            'value': 'str',
        },
        ('name', 'value',),
    ),
    'V1TCPSocketAction': (
        {
            'host': 'str',
            'port': 'object',
        },
        ('port',),
    ),
    'V1Toleration': (
        {
            'effect': 'str',
            'key': 'str',
            'operator': 'str',
            'tolerationSeconds': 'int',
            'value': 'str',
        },
        (),
    ),
    'V1TopologySpreadConstraint': (
        {
            'labelSelector': 'V1LabelSelector',
            'matchLabelKeys': 'list[str]',
            'maxSkew': 'int',
            'minDomains': 'int',
            'nodeAffinityPolicy': 'str',
            'nodeTaintsPolicy': 'str',
            'topologyKey': 'str',
            'whenUnsatisfiable': 'str',
        },
        ('maxSkew', 'topologyKey', 'whenUnsatisfiable',),
    ),
    'V1TypedLocalObjectReference': (
        {
            'apiGroup': 'str',
            'kind': 'str',
            'name': 'str',
        },
        ('kind', 'name',),
    ),
    'V1TypedObjectReference': (
        {
            'apiGroup': 'str',
            'kind': 'str',
            'name': 'str',
            'namespace': 'str',
        },
        ('kind', 'name',),
    ),
    'V1Volume': (
        {
            'awsElasticBlockStore': 'V1AWSElasticBlockStoreVolumeSource',
            'azureDisk': 'V1AzureDiskVolumeSource',
            'azureFile': 'V1AzureFileVolumeSource',
            'cephfs': 'V1CephFSVolumeSource',
            'cinder': 'V1CinderVolumeSource',
            'configMap': 'V1ConfigMapVolumeSource',
            'csi': 'V1CSIVolumeSource',
            'downwardAPI': 'V1DownwardAPIVolumeSource',
            'emptyDir': 'V1EmptyDirVolumeSource',
            'ephemeral': 'V1EphemeralVolumeSource',
            'fc': 'V1FCVolumeSource',
            'flexVolume': 'V1FlexVolumeSource',
            'flocker': 'V1FlockerVolumeSource',
            'gcePersistentDisk': 'V1GCEPersistentDiskVolumeSource',
            'gitRepo': 'V1GitRepoVolumeSource',
            'glusterfs': 'V1GlusterfsVolumeSource',
            'hostPath': 'V1HostPathVolumeSource',
            'image': 'V1ImageVolumeSource',
            'iscsi': 'V1ISCSIVolumeSource',
            'name': 'str',
            'nfs': 'V1NFSVolumeSource',
            'persistentVolumeClaim': 'V1PersistentVolumeClaimVolumeSource',
            'photonPersistentDisk': 'V1PhotonPersistentDiskVolumeSource',
            'portworxVolume': 'V1PortworxVolumeSource',
            'projected': 'V1ProjectedVolumeSource',
            'quobyte': 'V1QuobyteVolumeSource',
            'rbd': 'V1RBDVolumeSource',
            'scaleIO': 'V1ScaleIOVolumeSource',
            'secret': 'V1SecretVolumeSource',
            'storageos': 'V1StorageOSVolumeSource',
            'vsphereVolume': 'V1VsphereVirtualDiskVolumeSource',
        },
        ('name',),
    ),
    'V1VolumeDevice': (
        {
            'devicePath': 'str',
            'name': 'str',
        },
        ('devicePath', 'name',),
    ),
    'V1VolumeMount': (
        {
            'mountPath': 'str',
            'mountPropagation': 'str',
            'name': 'str',
            'readOnly': 'bool',
            'recursiveReadOnly': 'str',
            'subPath': 'str',
            'subPathExpr': 'str',
        },
        ('mountPath', 'name',),
    ),
    'V1VolumeProjection': (
        {
            'clusterTrustBundle': 'V1ClusterTrustBundleProjection',
            'configMap': 'V1ConfigMapProjection',
            'downwardAPI': 'V1DownwardAPIProjection',
            'podCertificate': 'V1PodCertificateProjection',
            'secret': 'V1SecretProjection',
            'serviceAccountToken': 'V1ServiceAccountTokenProjection',
        },
        (),
    ),
    'V1VolumeResourceRequirements': (
        {
            'limits': 'dict(str, str)',
            'requests': 'dict(str, str)',
        },
        (),
    ),
    'V1VsphereVirtualDiskVolumeSource': (
        {
            'fsType': 'str',
            'storagePolicyID': 'str',
            'storagePolicyName': 'str',
            'volumePath': 'str',
        },
        ('volumePath',),
    ),
    'V1WeightedPodAffinityTerm': (
        {
            'podAffinityTerm': 'V1PodAffinityTerm',
            'weight': 'int',
        },
        ('podAffinityTerm', 'weight',),
    ),
    'V1WindowsSecurityContextOptions': (
        {
            'gmsaCredentialSpec': 'str',
            'gmsaCredentialSpecName': 'str',
            'hostProcess': 'bool',
            'runAsUserName': 'str',
        },
        (),
    ),
}
